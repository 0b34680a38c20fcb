"""One finished request, as measured (the metric definitions: harness.metrics.table).

Definitions (all from integer nanosecond stamps on one monotonic clock):
- start: the intended send time in open loop (coordinated omission: a late send is the
  client's fault but the user still waited), the actual send time in closed loop.
- TTFT: first chunk that carries content (text or reasoning), never the role-only chunk.
- E2E: last content chunk - start.
- ITL per chunk: gap between consecutive content chunks; ITL per token: a chunk of k tokens
  contributes k samples of gap/k; tokens per chunk: k.
- TPOT: (E2E - TTFT) / (N - 1), N = output tokens (server usage, else tokenizer count).
- send lag: actual send - intended send (open loop only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.metrics.table import Derived, derive

SLO_FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms"}


@dataclass(slots=True)
class RequestRecord:
    index: int
    class_name: str
    request_id: str = ""
    intended_ns: int | None = None  # open loop: when it should have been sent
    sent_ns: int = 0  # stamped right before the request bytes were written
    connect_ns: int = 0  # time spent opening a connection for this request (0 = reused)
    role_ns: int | None = None  # role-only first chunk, kept for reference
    chunk_ns: list[int] = field(default_factory=list)  # arrival of each content chunk
    chunk_tokens: list[int] = field(default_factory=list)  # tokens in each content chunk
    done_ns: int | None = None  # stream end ([DONE] or close)
    input_tokens: int | None = None  # server usage.prompt_tokens
    intended_input_tokens: int = 0
    output_tokens: int | None = None  # server usage.completion_tokens, else tokenizer count
    output_source: str = "usage"  # usage | continuous_usage | tokenizer
    tokenizer_output_tokens: int | None = None  # our count of the text, to report disagreement
    cached_tokens: int | None = None
    error_kind: str | None = None
    error_detail: str = ""
    http_status: int | None = None
    events: int = 0
    coalesced_reads: int = 0  # reads that held several SSE events (they share one stamp)
    clock: str = "kernel"  # kernel | user
    warmup: bool = False
    #: (dimension, value) groupings this request is also recorded under, e.g. ("turn", "3")
    labels: tuple[tuple[str, str], ...] = ()
    session: int | None = None  # multi-turn: the session's index
    turn: int = 0  # multi-turn: 1-based turn number
    agent: str | None = None  # agentic sessions: the sub-agent that sent it ("<fan-out>.<agent>"), None: the parent
    ideal_cached_tokens: int | None = None  # multi-turn: what a large prefix cache could serve
    reply_text: str | None = None  # the streamed reply, kept only when a session needs it (never written)
    #: the server's own timing of this request (harness.client.server_timing): which source, and ns
    server_timing: str | None = None
    server_queue_ns: int | None = None
    server_prefill_ns: int | None = None
    server_decode_ns: int | None = None
    _derived: Derived | None = field(default=None, repr=False, compare=False)

    def derived(self) -> Derived:
        """The request's metric values (harness.metrics.table.derive), computed once per request:
        the recorder, the live exporter and the SLO check all read them from here."""
        d = self._derived
        if d is None:
            d = self._derived = derive(self)
        return d

    # ---- derived values (ns)
    @property
    def start_ns(self) -> int:
        return self.intended_ns if self.intended_ns is not None else self.sent_ns

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def ttft_ns(self) -> int | None:
        return self.chunk_ns[0] - self.start_ns if self.chunk_ns else None

    @property
    def e2e_ns(self) -> int | None:
        return self.chunk_ns[-1] - self.start_ns if self.chunk_ns else None

    @property
    def send_lag_ns(self) -> int | None:
        return self.sent_ns - self.intended_ns if self.intended_ns is not None else None

    @property
    def tpot_ns(self) -> float | None:
        n = self.output_tokens
        if not self.chunk_ns or n is None or n < 2:
            return None
        return (self.chunk_ns[-1] - self.chunk_ns[0]) / (n - 1)

    def to_json(self) -> dict[str, Any]:
        """The requests.jsonl line: enough to recompute every metric of this request."""
        ms = 1e6
        start = self.start_ns  # once, not once per chunk (the offsets below are per token)
        ttft, e2e, tpot, lag = self.ttft_ns, self.e2e_ns, self.tpot_ns, self.send_lag_ns
        return {
            "i": self.index,
            "id": self.request_id,
            "class": self.class_name,
            "warmup": self.warmup,
            "intended_ns": self.intended_ns,
            "sent_ns": self.sent_ns,
            "connect_ms": self.connect_ns / ms,
            "ttft_ms": None if ttft is None else ttft / ms,
            "e2e_ms": None if e2e is None else e2e / ms,
            "tpot_ms": None if tpot is None else tpot / ms,
            "send_lag_ms": None if lag is None else lag / ms,
            "input_tokens": self.input_tokens,
            "intended_input_tokens": self.intended_input_tokens,
            "output_tokens": self.output_tokens,
            "output_source": self.output_source,
            "tokenizer_output_tokens": self.tokenizer_output_tokens,
            "cached_tokens": self.cached_tokens,
            "chunks": len(self.chunk_ns),
            "chunk_offsets_us": [(t - start) // 1000 for t in self.chunk_ns],
            "chunk_tokens": self.chunk_tokens,
            "coalesced_reads": self.coalesced_reads,
            "clock": self.clock,
            "status": self.http_status,
            "error": self.error_kind,
            "error_detail": self.error_detail[:300] if self.error_detail else None,
            **({"session": self.session, "turn": self.turn} if self.session is not None else {}),
            **({"agent": self.agent} if self.agent is not None else {}),
            **(
                {"ideal_cached_tokens": self.ideal_cached_tokens}
                if self.session is not None or self.ideal_cached_tokens is not None
                else {}
            ),
            **({"labels": dict(self.labels)} if self.labels else {}),
            **(self._server_json() if self.server_timing is not None else {}),
        }

    def _server_json(self) -> dict[str, Any]:
        """The server's own timing, and TTFT split into its parts (ms; parts the server does not
        report are absent): send lag + network + queue + prefill = the client's TTFT."""
        ms = 1e6

        def v(ns: int | None) -> float | None:
            return None if ns is None else round(ns / ms, 3)

        out: dict[str, Any] = {
            "server": {
                "timing": self.server_timing,
                "queue_ms": v(self.server_queue_ns),
                "prefill_ms": v(self.server_prefill_ns),
                "decode_ms": v(self.server_decode_ns),
            }
        }
        d = self.derived()
        if d.ttft is not None:
            parts = {"send_lag": d.send_lag, "network": d.network, "queue": d.queue, "prefill": d.prefill}
            out["ttft_parts_ms"] = {k: v(x) for k, x in parts.items() if x is not None}
        return out


def within_slo(ok: bool, latency_ms: dict[str, float | None], slo: dict[str, float | None]) -> bool:
    """The SLO predicate, the one every layer uses (the recorder on live records, harness.compare on
    requests.jsonl): good = no error and every limit that is set holds. `latency_ms` maps the SLO
    keys (ttft_ms, tpot_ms, e2e_ms) to the request's values in ms. A one-token answer has no TPOT
    and cannot violate it; a missing TTFT or E2E (no content arrived) fails its limit."""
    if not ok:
        return False
    for key in SLO_FIELDS.values():
        limit = slo.get(key)
        if limit is None:
            continue
        value = latency_ms.get(key)
        if value is None:
            if key == "tpot_ms":
                continue
            return False
        if float(value) > float(limit):
            return False
    return True


def meets_slo(rec: RequestRecord, slo: dict[str, float | None]) -> bool:
    """A live record against its class's SLO (limits in ms): `within_slo` on its derived values."""
    if not rec.ok:
        return False
    d = rec.derived()
    values: dict[str, float | None] = {"ttft": d.ttft, "tpot": d.tpot, "e2e": d.e2e}
    return within_slo(True, {key: _ms(values[m]) for m, key in SLO_FIELDS.items()}, slo)


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6
