"""Per-process aggregation of finished requests into HDR histograms and counters.

One `MetricSet` per process; `record()` runs once per finished request (never per token on the
read path). Sets serialise with `to_dict()` and merge losslessly with `merge_dict()`, which is how
distributed workers' measurements reach the master. `summarize()` produces the summary blocks.
"""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Any

import numpy as np

from harness.metrics.hdr import COUNT, LATENCY, Histogram
from harness.metrics.record import RequestRecord, meets_slo
from harness.metrics.table import HIST_NAMES, LATENCY_NAMES, METRICS, Metric
from harness.metrics.ttft_parts import TtftParts

ALL = "_all"
#: histograms.json keys beside the classes: groupings ({"turn=3": class-shaped block}) and sessions
GROUPS, SESSIONS = "_groups", "_sessions"
RESERVED = (ALL, GROUPS, SESSIONS)
__all__ = [
    "ALL",
    "HIST_NAMES",
    "LATENCY_NAMES",
    "ClassMetrics",
    "MetricSet",
    "histogram_for",
]  # the names come from the table
NS_PER_MS = 1e6
_COUNTS = frozenset(m.name for m in METRICS if m.hdr == "count")
#: counters every class block writes, zero included: a process (a distributed worker, a class)
#: that completed no request is a result that says 0, not one whose readers meet a missing key
#: (a worker with 0 completed requests in a 3-s test read as KeyError 'completed')
CORE_COUNTS = ("completed", "failed", "good", "input_tokens", "output_tokens")


def histogram_for(m: Metric) -> Histogram:
    """An empty HDR histogram with the range the metric's table entry names."""
    return Histogram(LATENCY if m.hdr == "latency" else COUNT)


class ClassMetrics:
    """Histograms and counters for one request class (or all of them).

    Per-request values are appended to plain int arrays and flushed into the HDR histograms in
    bulk (numpy) once enough have gathered or when anything reads the histograms: recording a
    500-token request costs microseconds, not the ~1 ms hdrh's per-value path would take.
    """

    FLUSH_AT = 16384

    def __init__(self) -> None:
        self.hist: dict[str, Histogram] = {m.name: histogram_for(m) for m in METRICS}
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.parts = TtftParts()  # TTFT split with the server's timing, by TTFT (the tail's shares)
        self._pending: dict[str, array[int]] = {name: array("q") for name in HIST_NAMES}
        self._n_pending = 0

    def record(self, rec: RequestRecord, good: bool) -> None:
        c = self.counts
        if not rec.ok:
            c["failed"] += 1
            self.errors[rec.error_kind or "unknown"] += 1
            return
        c["completed"] += 1
        c["good"] += good
        c["input_tokens"] += rec.input_tokens if rec.input_tokens is not None else rec.intended_input_tokens
        c["output_tokens"] += rec.output_tokens or 0
        prompt = rec.input_tokens if rec.input_tokens is not None else rec.intended_input_tokens
        if rec.cached_tokens is not None:  # usage.prompt_tokens_details (servers that report it)
            c["cached_tokens"] += rec.cached_tokens
            c["with_cached_usage"] += 1
            c["cached_prompt_tokens"] += prompt  # the prompts those cached tokens are a share of
        if rec.ideal_cached_tokens is not None:  # what the workload allows (sessions, hash-block traces)
            c["ideal_cached_tokens"] += rec.ideal_cached_tokens
            c["ideal_prompt_tokens"] += prompt
        c[f"output_source:{rec.output_source}"] += 1
        if rec.server_timing is not None:
            c[f"server_timing:{rec.server_timing}"] += 1
        p = self._pending
        d = rec.derived()
        self.parts.record(rec.request_id, rec.server_timing is not None, d)
        for m in METRICS:  # each metric's samples of this request (harness.metrics.table)
            v = m.sample(d)
            if v is None:
                continue
            if isinstance(v, list):
                p[m.name].extend(v)
            else:
                p[m.name].append(v)
        times = rec.chunk_ns
        self._n_pending += len(times) * 2 + 4
        if self._n_pending >= self.FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        """Move pending values into the HDR histograms."""
        if not self._n_pending:
            return
        for name, values in self._pending.items():
            if values:
                data = np.frombuffer(values, dtype=np.int64)
                if name in _COUNTS:  # a count histogram starts at 1
                    data = np.maximum(data, 1)
                self.hist[name].record_array(data)
                self._pending[name] = array("q")
        self._n_pending = 0

    def merge(self, other: ClassMetrics) -> None:
        self.flush()
        other.flush()
        for name, hist in other.hist.items():
            self.hist[name].merge(hist)
        self.counts.update(other.counts)
        self.errors.update(other.errors)
        self.parts.merge(other.parts)

    def to_dict(self) -> dict[str, Any]:
        self.flush()
        return {
            "hist": {name: h.to_dict() for name, h in self.hist.items()},
            "counts": {**dict.fromkeys(CORE_COUNTS, 0), **self.counts},
            "errors": dict(self.errors),
            "ttft_parts": self.parts.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassMetrics:
        out = cls()
        for name, hd in data.get("hist", {}).items():
            out.hist[name] = Histogram.from_dict(hd)
        out.counts.update(data.get("counts", {}))
        out.errors.update(data.get("errors", {}))
        if data.get("ttft_parts"):
            out.parts = TtftParts.from_dict(data["ttft_parts"])
        return out

    def cache(self) -> dict[str, Any] | None:
        """Prefix-cache outcome of these requests: the share of prompt tokens the server said it
        served from cache (usage.prompt_tokens_details.cached_tokens, over the requests that
        reported it), beside the share the workload allows (sessions, hash-block traces)."""
        c = self.counts
        if not c["with_cached_usage"] and not c["ideal_prompt_tokens"]:
            return None
        reported, ideal = c["cached_prompt_tokens"], c["ideal_prompt_tokens"]
        return {
            "requests_reporting": c["with_cached_usage"],
            "prompt_tokens": reported,
            "cached_tokens": c["cached_tokens"],
            "hit_rate": (c["cached_tokens"] / reported) if reported else None,
            "ideal_cached_tokens": c["ideal_cached_tokens"] if ideal else None,
            "ideal_hit_rate": (c["ideal_cached_tokens"] / ideal) if ideal else None,
        }

    def summarize(self, duration_s: float) -> dict[str, Any]:
        self.flush()
        c = self.counts
        dur = duration_s if duration_s > 0 else float("nan")
        completed, failed = c["completed"], c["failed"]
        sources = {k.split(":", 1)[1]: v for k, v in c.items() if k.startswith("output_source:")}
        return {
            "requests": {
                "completed": completed,
                "failed": failed,
                "errors_by_kind": dict(sorted(self.errors.items())),
                "rps": _rate(completed, dur),
            },
            "tokens": {
                "input_total": c["input_tokens"],
                "output_total": c["output_tokens"],
                "input_per_s": _rate(c["input_tokens"], dur),
                "output_per_s": _rate(c["output_tokens"], dur),
                "output_count_source": sources,
                **({"cached_input_total": c["cached_tokens"]} if c["with_cached_usage"] else {}),
            },
            "latency_ms": {name: self.hist[name].stats(NS_PER_MS) for name in LATENCY_NAMES},
            "tokens_per_chunk": self.hist["tokens_per_chunk"].stats(1.0),
            "goodput": {
                "good": c["good"],
                "total": completed + failed,
                "fraction": (c["good"] / (completed + failed)) if (completed + failed) else None,
                "rps": _rate(c["good"], dur),
            },
            **({"cache": cache} if (cache := self.cache()) is not None else {}),
            **({"ttft_breakdown": parts} if (parts := self.parts.summarize()) is not None else {}),
        }


def _rate(n: float, duration_s: float) -> float:
    value = n / duration_s
    return 0.0 if value != value else value  # NaN (no duration) -> 0


class SessionStats:
    """Multi-turn sessions of the window: how many, how long, and the prefix cache they allow.

    `ideal_cached_tokens` / `prompt_tokens` is the hit rate a large-enough prefix cache would give
    these conversations (harness.workload.sessions); `cached_tokens` what the server's usage said."""

    def __init__(self) -> None:
        self.duration = Histogram(LATENCY)
        self.counts: Counter[str] = Counter()

    def session_end(self, duration_ns: int | None, turns: int, completed: bool) -> None:
        self.counts["completed" if completed else "cut"] += 1
        self.counts["turns_in_ended"] += turns
        if completed and duration_ns is not None:
            self.duration.record(max(1, duration_ns))

    def agent_end(self, conv: Any, completed: bool) -> None:
        """An agentic session ended (harness.workload.agent.AgentConversation): its calls and, when
        it completed, its parent's timeline: waiting on the engine, on tools, on the user, on
        sub-agents (microseconds, so the counters stay integers and merge exactly)."""
        c = self.counts
        c["agent_sessions"] += 1
        c["agent_calls"] += conv.calls
        c["agent_tool_calls"] += conv.tool_calls
        c["agent_fan_outs"] += conv.fan_outs
        c["agent_subagents"] += conv.subagents
        if completed and conv.started_ns is not None:
            c["agent_completed"] += 1
            c["agent_wall_us"] += max(0, conv.last_end_ns - conv.started_ns) // 1000
            for key in ("engine_s", "tool_s", "think_s", "subagent_s", "sub_engine_s", "sub_tool_s"):
                c[f"agent_{key[:-2]}_us"] += round(getattr(conv, key) * 1e6)

    def _agent_summary(self) -> dict[str, Any] | None:
        c = self.counts
        n = c["agent_sessions"]
        if not n:
            return None
        done, wall = c["agent_completed"], c["agent_wall_us"]
        parts = {
            "engine": c["agent_engine_us"],
            "tools": c["agent_tool_us"],
            "think": c["agent_think_us"],
            "subagents": c["agent_subagent_us"],
        }
        return {
            "sessions": n,
            "completed": done,
            "calls_per_session": c["agent_calls"] / n,
            "tool_calls": c["agent_tool_calls"],
            "fan_outs": c["agent_fan_outs"],
            "subagents": c["agent_subagents"],
            # the completed sessions' parents: where their wall time went
            "wall_s": wall / 1e6,
            "waiting_s": {k: v / 1e6 for k, v in parts.items()},
            "share": {k: (v / wall if wall else None) for k, v in parts.items()},
            # the sub-agents' own requests and tools, summed (they run in parallel: may exceed the wall)
            "subagent_work_s": {"engine": c["agent_sub_engine_us"] / 1e6, "tools": c["agent_sub_tool_us"] / 1e6},
        }

    def turn(self, rec: RequestRecord) -> None:
        c = self.counts
        c["turns"] += 1
        c["started"] += rec.turn == 1
        if rec.ok and rec.ideal_cached_tokens is not None:
            c["prompt_tokens"] += rec.input_tokens if rec.input_tokens is not None else rec.intended_input_tokens
            c["ideal_cached_tokens"] += rec.ideal_cached_tokens
            if rec.cached_tokens is not None:
                c["usage_cached_tokens"] += rec.cached_tokens
                c["turns_with_cached_usage"] += 1

    def merge(self, other: SessionStats) -> None:
        self.duration.merge(other.duration)
        self.counts.update(other.counts)

    def to_dict(self) -> dict[str, Any]:
        return {"duration": self.duration.to_dict(), "counts": dict(self.counts)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionStats:
        out = cls()
        if data.get("duration"):
            out.duration = Histogram.from_dict(data["duration"])
        out.counts.update(data.get("counts", {}))
        return out

    def summarize(self) -> dict[str, Any] | None:
        c = self.counts
        if not c["turns"]:
            return None
        ended = c["completed"] + c["cut"]
        prompt = c["prompt_tokens"]
        return {
            "started": c["started"],
            "completed": c["completed"],
            "cut": c["cut"],  # ended by the window's end or a failed turn
            "turns": c["turns"],
            "turns_per_ended_session": (c["turns_in_ended"] / ended) if ended else None,
            "duration_s": self.duration.stats(1e9),
            "prompt_tokens": prompt,
            "ideal_cached_tokens": c["ideal_cached_tokens"],
            "ideal_prefix_hit_rate": (c["ideal_cached_tokens"] / prompt) if prompt else None,
            "usage_cached_hit_rate": (c["usage_cached_tokens"] / prompt)
            if prompt and c["turns_with_cached_usage"]
            else None,
            **({"agent": agent} if (agent := self._agent_summary()) is not None else {}),
        }


class MetricSet:
    """Per-class metrics; the overall `_all` block is the lossless merge of the classes.

    Only classes are recorded per request (recording `_all` too would double the work); `_all`
    is built on demand, which gives exactly the histograms direct recording would have. A request
    with `labels` is also recorded under each grouping (`"turn=3"`, `"adapter=a"`, ...): the same
    metrics, sliced another way, merged losslessly like the classes.
    """

    def __init__(self, slos: dict[str, dict[str, float | None]] | None = None) -> None:
        self.slos = slos or {}
        self.by_class: dict[str, ClassMetrics] = {}
        self.by_group: dict[str, ClassMetrics] = {}
        self.sessions = SessionStats()

    def record(self, rec: RequestRecord) -> bool:
        """Add one finished (non-warmup) request; returns whether it met its SLO."""
        good = meets_slo(rec, self.slos.get(rec.class_name, self.slos.get(ALL, {})))
        cls = self.by_class.get(rec.class_name)
        if cls is None:
            cls = self.by_class[rec.class_name] = ClassMetrics()
        cls.record(rec, good)
        for dim, value in rec.labels:
            key = f"{dim}={value}"
            grp = self.by_group.get(key)
            if grp is None:
                grp = self.by_group[key] = ClassMetrics()
            grp.record(rec, good)
        if rec.session is not None:
            self.sessions.turn(rec)
        return good

    def groups(self, dim: str) -> dict[str, ClassMetrics]:
        """{value: metrics} of one grouping dimension (e.g. "turn")."""
        prefix = f"{dim}="
        return {k[len(prefix) :]: cm for k, cm in self.by_group.items() if k.startswith(prefix)}

    @property
    def dimensions(self) -> list[str]:
        return sorted({k.split("=", 1)[0] for k in self.by_group})

    @property
    def classes(self) -> dict[str, ClassMetrics]:
        """`_all` (merged) first, then every class."""
        overall = ClassMetrics()
        for cm in self.by_class.values():
            overall.merge(cm)
        return {ALL: overall, **self.by_class}

    def merge(self, other: MetricSet) -> None:
        for name, cm in other.by_class.items():
            self.by_class.setdefault(name, ClassMetrics()).merge(cm)
        for key, cm in other.by_group.items():
            self.by_group.setdefault(key, ClassMetrics()).merge(cm)
        self.sessions.merge(other.sessions)

    def to_dict(self, with_all: bool = True) -> dict[str, Any]:
        """histograms.json: classes (and `_all` unless a delta), `_groups` and `_sessions` when recorded."""
        out = {name: cm.to_dict() for name, cm in (self.classes if with_all else self.by_class).items()}
        if self.by_group:
            out[GROUPS] = {key: cm.to_dict() for key, cm in sorted(self.by_group.items())}
        if self.sessions.counts:
            out[SESSIONS] = self.sessions.to_dict()
        return out

    def merge_dict(self, data: dict[str, Any]) -> None:
        for name, cd in data.items():
            if name == ALL:
                continue  # derived from the classes
            if name == GROUPS:
                for key, gd in cd.items():
                    self.by_group.setdefault(key, ClassMetrics()).merge(ClassMetrics.from_dict(gd))
                continue
            if name == SESSIONS:
                self.sessions.merge(SessionStats.from_dict(cd))
                continue
            self.by_class.setdefault(name, ClassMetrics()).merge(ClassMetrics.from_dict(cd))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MetricSet:
        out = cls()
        out.merge_dict(data)
        return out

    def encoded_histograms(self) -> dict[str, dict[str, str]]:
        """{class: {metric: HDR V2 base64}} for histograms.json consumers that only want HDR."""
        return {name: {m: h.to_dict()["hdr"] for m, h in cm.hist.items()} for name, cm in self.classes.items()}


def class_keys(histograms: dict[str, Any]) -> list[str]:
    """The class names of a histograms.json object (not `_all`, `_groups`, `_sessions`)."""
    return [k for k in histograms if k not in RESERVED]
