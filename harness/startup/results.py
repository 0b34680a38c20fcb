"""`startup.json`: every start (time to ready, phases, facts), per config min/median/max per phase
for cold and warm starts, the steady-state figures of the scenario, and the trade-off per config
against the first one (startup saved vs throughput lost). Rewritten whole after every start.

    {"name", "file", "created", "updated", "cold", "warm", "interrupted",
     "starts": [{id, config_id, kind, n, status, ready_s, phases{load, compile, kv_profile, capture, rest},
                 logged_s, engine_init_s, facts, cache_dir, log, argv, reason}],
     "configs": [{id, flags, varied, summary: {cold|warm: {ready|<phase>: {min, median, max, n}}},
                  facts, steady: {output_tok_per_s, req_per_s, ttft_p50_ms, itl_p50_ms, status, run_dir}}],
     "tradeoffs": [{config_id, vs, cold_saved_s, warm_saved_s, output_tok_per_s, vs_output_tok_per_s,
                    throughput_change, payback_s}]}
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.results.engine_facts import facts_line
from harness.results.startup_phases import PHASES
from harness.sweep.results import atomic_write

SCHEMA_VERSION = 1
STEADY_KEYS = ("output_tok_per_s", "req_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")


def stats(values: list[float]) -> dict[str, float | int] | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


class StartupResults:
    def __init__(self, out_dir: Path, data: dict[str, Any]) -> None:
        self.out_dir = out_dir
        self.path = out_dir / "startup.json"
        self.data = data
        self.interrupted = bool(data.get("interrupted"))

    @classmethod
    def new(cls, out_dir: Path, plan: Any) -> StartupResults:
        spec = plan.spec
        data = {
            "schema_version": SCHEMA_VERSION, "name": spec.name, "file": str(plan.source),
            "description": spec.description, "engine": spec.engine.kind, "cold": spec.cold, "warm": spec.warm,
            "cold_model": spec.cold_model, "scenario": spec.scenario,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "updated": None, "interrupted": False,
            "config_order": [c.id for c in plan.configs],
            "config_flags": {c.id: {"flags": c.flags, "varied": c.varied} for c in plan.configs},
            "starts": [], "steady": {},
        }
        return cls(out_dir, data)

    @classmethod
    def load(cls, out_dir: Path) -> StartupResults:
        path = out_dir / "startup.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot read it ({exc}); give the directory of an earlier `harness startup`") from None
        data["interrupted"] = False
        return cls(out_dir, data)

    # ------------------------------------------------------------ records
    def start(self, start_id: str) -> dict[str, Any] | None:
        return next((s for s in self.data["starts"] if s["id"] == start_id), None)

    def record(self, record: dict[str, Any]) -> None:
        self.data["starts"] = [s for s in self.data["starts"] if s["id"] != record["id"]] + [record]
        self.write()

    def steady_done(self, config_id: str) -> bool:
        entry = self.data["steady"].get(config_id)
        return bool(entry) and entry.get("status") == "complete"

    def record_steady(self, config_id: str, entry: dict[str, Any]) -> None:
        metrics = entry.get("metrics") or {}
        self.data["steady"][config_id] = {
            "status": entry.get("status"), "reason": entry.get("reason"),
            "run_dir": f"steady/{entry['run_dir']}" if entry.get("run_dir") else None,
            **{k: metrics.get(k) for k in STEADY_KEYS},
        }
        self.write()

    # ------------------------------------------------------------ derived
    def configs(self) -> list[dict[str, Any]]:
        out = []
        order = self.data.get("config_order") or sorted({s["config_id"] for s in self.data["starts"]})
        for cid in order:
            starts = [s for s in self.data["starts"] if s["config_id"] == cid]
            summary: dict[str, Any] = {}
            for kind in ("cold", "warm"):
                ok = [s for s in starts if s["kind"] == kind and s.get("status") == "ok"]
                if not ok:
                    continue
                block = {"ready": stats([s["ready_s"] for s in ok])}
                for p in PHASES:
                    st = stats([s["phases"].get(p) for s in ok])
                    if st is not None:
                        block[p] = st
                summary[kind] = block
            failed = [s for s in starts if s.get("status") == "failed"]
            facts = next((s.get("facts") for s in starts if s.get("status") == "ok"), None) or {}
            out.append({
                "id": cid, **(self.data.get("config_flags", {}).get(cid) or {}), "summary": summary, "facts": facts,
                "facts_line": facts_line(facts), "failed": [{"id": s["id"], "reason": s.get("reason")} for s in failed],
                "steady": self.data["steady"].get(cid),
            })
        return out

    def tradeoffs(self, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each config against the first: the startup it saves and the steady throughput it costs.
        payback_s: seconds of full-load serving after which the slower-starting config has produced
        as many tokens as the faster-starting one (the guide: 'long-running services usually recover
        compilation cost')."""
        if len(configs) < 2:
            return []
        ref = configs[0]
        out = []
        for c in configs[1:]:
            row: dict[str, Any] = {"config_id": c["id"], "vs": ref["id"]}
            for kind in ("cold", "warm"):
                a = (ref["summary"].get(kind) or {}).get("ready")
                b = (c["summary"].get(kind) or {}).get("ready")
                row[f"{kind}_saved_s"] = a["median"] - b["median"] if a and b else None
            ra = (ref.get("steady") or {}).get("output_tok_per_s")
            rb = (c.get("steady") or {}).get("output_tok_per_s")
            row["output_tok_per_s"], row["vs_output_tok_per_s"] = rb, ra
            row["throughput_change"] = (rb / ra - 1.0) if ra and rb else None
            row["payback_s"] = _payback(row.get("warm_saved_s") if row.get("warm_saved_s") is not None else row.get("cold_saved_s"), ra, rb)
            out.append(row)
        return out

    def write(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.data["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.data["interrupted"] = self.interrupted
        configs = self.configs()
        self.data["configs"] = configs
        self.data["tradeoffs"] = self.tradeoffs(configs)
        atomic_write(self.path, json.dumps(self.data, indent=1, default=str) + "\n")

    def counts(self) -> dict[str, int]:
        starts = self.data["starts"]
        return {"ok": sum(1 for s in starts if s.get("status") == "ok"),
                "failed": sum(1 for s in starts if s.get("status") == "failed")}


def _payback(saved_s: float | None, ref_tps: float | None, tps: float | None) -> float | None:
    """Seconds of serving after the later-ready config is up until it has caught up in tokens."""
    if saved_s is None or not ref_tps or not tps or saved_s == 0:
        return None
    fast_start, fast_tps, slow_tps = (tps, tps, ref_tps) if saved_s > 0 else (ref_tps, ref_tps, tps)
    if slow_tps <= fast_tps:
        return None  # the later-ready config never catches up
    return abs(saved_s) * fast_start / (slow_tps - fast_tps)


# ---------------------------------------------------------------- console
def _f(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else f"{v:{spec}}"


def _mmm(st: dict[str, Any] | None) -> str:
    if not st:
        return "-"
    if st["n"] == 1:
        return f"{st['median']:.2f}"
    return f"{st['median']:.2f} ({st['min']:.2f}-{st['max']:.2f})"


def console_table(results: StartupResults) -> str:
    configs = results.data.get("configs") or results.configs()
    lines = ["time to ready by phase, seconds: median (min-max) over the starts "
             "(load: weights; kv_profile: KV profiling/allocation; rest: process start, imports, API server)"]
    head = f"  {'config':<28} {'start':<5} {'n':>2}  {'ready':<19} " + " ".join(f"{p:<19}" for p in PHASES)
    lines.append(head)
    for c in configs:
        for kind in ("cold", "warm"):
            block = c["summary"].get(kind)
            if not block:
                continue
            cells = " ".join(f"{_mmm(block.get(p)):<19}" for p in PHASES)
            lines.append(f"  {c['id'][:28]:<28} {kind:<5} {block['ready']['n']:>2}  {_mmm(block['ready']):<19} {cells}")
        for f in c["failed"]:
            lines.append(f"  {c['id'][:28]:<28} ✗ {f['id']}: {(f['reason'] or '')[:120]}")
        if c.get("facts_line"):
            lines.append(f"  {'':<28} {c['facts_line']}")
    steady = [c for c in configs if c.get("steady")]
    if steady:
        lines.append("")
        lines.append("steady state after the warm start (scenario " + str(results.data.get("scenario")) + ")")
        for c in steady:
            s = c["steady"]
            if s.get("status") != "complete":
                lines.append(f"  {c['id']:<28} {s.get('status')}: {s.get('reason') or ''}")
                continue
            lines.append(f"  {c['id']:<28} {_f(s.get('output_tok_per_s'), ',.0f')} output tok/s, {_f(s.get('req_per_s'))} req/s, "
                         f"TTFT p50 {_f(s.get('ttft_p50_ms'), '.0f')} ms, ITL p50 {_f(s.get('itl_p50_ms'), '.1f')} ms")
    trade = results.data.get("tradeoffs") or []
    if trade:
        lines.append("")
        lines.append("trade-off against " + trade[0]["vs"] + " (the guide: eager mode saves startup and usually costs steady-state speed)")
        for t in trade:
            bits = []
            for kind in ("cold", "warm"):
                v = t.get(f"{kind}_saved_s")
                if v is not None:
                    bits.append(f"{kind} start {abs(v):.2f}s {'faster' if v >= 0 else 'slower'}")
            if t.get("throughput_change") is not None:
                bits.append(f"steady output {t['throughput_change'] * 100:+.0f}% ({_f(t['output_tok_per_s'], ',.0f')} vs "
                            f"{_f(t['vs_output_tok_per_s'], ',.0f')} tok/s)")
            if t.get("payback_s") is not None:
                bits.append(f"the later-ready config catches up in tokens {t['payback_s']:.0f}s after it is up (at full load)")
            lines.append(f"  {t['config_id']}: " + ("; ".join(bits) or "no figures to compare"))
    return "\n".join(lines) + "\n"
