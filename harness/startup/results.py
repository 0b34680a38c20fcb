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

import statistics
import time
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.results.engine_facts import facts_line
from harness.results.models import FILES
from harness.results.models.facts import StartupFacts
from harness.results.models.startup import (
    ConfigFlags,
    FailedStart,
    PhaseStats,
    Start,
    StartupConfig,
    StartupDoc,
    Steady,
    Tradeoff,
)
from harness.results.models.sweep import Cell as IndexCell
from harness.results.read import load_startup
from harness.results.startup_phases import PHASES
from harness.sweep.results import atomic_write

SCHEMA_VERSION = 1


def stats(values: list[float | None]) -> PhaseStats | None:
    got = [v for v in values if v is not None]
    if not got:
        return None
    return PhaseStats(min=min(got), median=statistics.median(got), max=max(got), n=len(got))


class StartupResults:
    """startup.json (harness.results.models.startup.StartupDoc), rewritten whole after every start."""

    def __init__(self, out_dir: Path, data: StartupDoc) -> None:
        self.out_dir = out_dir
        self.path = out_dir / "startup.json"
        self.data = data
        self.interrupted = data.interrupted

    @classmethod
    def new(cls, out_dir: Path, plan: Any) -> StartupResults:
        spec = plan.spec
        data = StartupDoc(
            schema_version=SCHEMA_VERSION,
            name=spec.name,
            file=str(plan.source),
            description=spec.description,
            engine=spec.engine.kind,
            cold=spec.cold,
            warm=spec.warm,
            cold_model=spec.cold_model,
            scenario=spec.scenario,
            created=time.strftime("%Y-%m-%dT%H:%M:%S"),
            updated=None,
            interrupted=False,
            config_order=[c.id for c in plan.configs],
            config_flags={c.id: ConfigFlags(flags=c.flags, varied=c.varied) for c in plan.configs},
            starts=[],
            steady={},
        )
        return cls(out_dir, data)

    @classmethod
    def load(cls, out_dir: Path) -> StartupResults:
        path = out_dir / "startup.json"
        try:
            data = load_startup(path)
        except UserError as exc:
            raise UserError(f"{exc.lines[0]}; give the directory of an earlier `harness startup`") from None
        data.interrupted = False
        return cls(out_dir, data)

    # ------------------------------------------------------------ records
    def start(self, start_id: str) -> Start | None:
        return next((s for s in self.data.starts if s.id == start_id), None)

    def record(self, record: Start) -> None:
        self.data.starts = [s for s in self.data.starts if s.id != record.id] + [record]
        self.write()

    def steady_done(self, config_id: str) -> bool:
        entry = self.data.steady.get(config_id)
        return entry is not None and entry.status == "complete"

    def record_steady(self, config_id: str, entry: IndexCell) -> None:
        m = entry.metrics
        self.data.steady[config_id] = Steady(
            status=entry.status,
            reason=entry.reason,
            run_dir=f"steady/{entry.run_dir}" if entry.run_dir else None,
            output_tok_per_s=m.output_tok_per_s,
            req_per_s=m.req_per_s,
            ttft_p50_ms=m.ttft_p50_ms,
            ttft_p99_ms=m.ttft_p99_ms,
            itl_p50_ms=m.itl_p50_ms,
            itl_p99_ms=m.itl_p99_ms,
        )
        self.write()

    # ------------------------------------------------------------ derived
    def configs(self) -> list[StartupConfig]:
        out = []
        order = self.data.config_order or sorted({s.config_id for s in self.data.starts})
        for cid in order:
            starts = [s for s in self.data.starts if s.config_id == cid]
            summary: dict[str, dict[str, PhaseStats]] = {}
            for kind in ("cold", "warm"):
                ok = [s for s in starts if s.kind == kind and s.status == "ok"]
                if not ok:
                    continue
                ready = stats([s.ready_s for s in ok])
                block = {"ready": ready} if ready is not None else {}
                for p in PHASES:
                    st = stats([getattr(s.phases, p) if s.phases is not None else None for s in ok])
                    if st is not None:
                        block[p] = st
                summary[kind] = block
            failed = [s for s in starts if s.status == "failed"]
            facts = next((s.facts for s in starts if s.status == "ok"), StartupFacts())
            flags = self.data.config_flags.get(cid)
            out.append(
                StartupConfig.model_validate(
                    {
                        "id": cid,
                        **(flags.model_dump() if flags is not None else {}),
                        "summary": summary,
                        "facts": facts,
                        "facts_line": facts_line(facts),
                        "failed": [FailedStart(id=s.id, reason=s.reason) for s in failed],
                        "steady": self.data.steady.get(cid),
                    }
                )
            )
        return out

    def tradeoffs(self, configs: list[StartupConfig]) -> list[Tradeoff]:
        """Each config against the first: the startup it saves and the steady throughput it costs.
        payback_s: seconds of full-load serving after which the slower-starting config has produced
        as many tokens as the faster-starting one (the guide: 'long-running services usually recover
        compilation cost')."""
        if len(configs) < 2:
            return []
        ref = configs[0]
        out = []
        for c in configs[1:]:
            saved: dict[str, float | None] = {}
            for kind in ("cold", "warm"):
                a = ref.summary.get(kind, {}).get("ready")
                b = c.summary.get(kind, {}).get("ready")
                saved[kind] = a.median - b.median if a and b else None
            ra = ref.steady.output_tok_per_s if ref.steady else None
            rb = c.steady.output_tok_per_s if c.steady else None
            out.append(
                Tradeoff(
                    config_id=c.id,
                    vs=ref.id,
                    cold_saved_s=saved["cold"],
                    warm_saved_s=saved["warm"],
                    output_tok_per_s=rb,
                    vs_output_tok_per_s=ra,
                    throughput_change=(rb / ra - 1.0) if ra and rb else None,
                    payback_s=_payback(saved["warm"] if saved["warm"] is not None else saved["cold"], ra, rb),
                )
            )
        return out

    def write(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.data.updated = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.data.interrupted = self.interrupted
        configs = self.configs()
        self.data.configs = configs
        self.data.tradeoffs = self.tradeoffs(configs)
        atomic_write(self.path, FILES["startup.json"].dumps(self.data))

    def counts(self) -> dict[str, int]:
        starts = self.data.starts
        return {
            "ok": sum(1 for s in starts if s.status == "ok"),
            "failed": sum(1 for s in starts if s.status == "failed"),
        }


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


def _mmm(st: PhaseStats | None) -> str:
    if st is None:
        return "-"
    if st.n == 1:
        return f"{st.median:.2f}"
    return f"{st.median:.2f} ({st.min:.2f}-{st.max:.2f})"


def console_table(results: StartupResults) -> str:
    configs = results.data.configs or results.configs()
    lines = [
        "time to ready by phase, seconds: median (min-max) over the starts "
        "(load: weights; kv_profile: KV profiling/allocation; rest: process start, imports, API server)"
    ]
    head = f"  {'config':<28} {'start':<5} {'n':>2}  {'ready':<19} " + " ".join(f"{p:<19}" for p in PHASES)
    lines.append(head)
    for c in configs:
        for kind in ("cold", "warm"):
            block = c.summary.get(kind)
            if not block or "ready" not in block:
                continue
            cells = " ".join(f"{_mmm(block.get(p)):<19}" for p in PHASES)
            lines.append(f"  {c.id[:28]:<28} {kind:<5} {block['ready'].n:>2}  {_mmm(block['ready']):<19} {cells}")
        for f in c.failed:
            lines.append(f"  {c.id[:28]:<28} ✗ {f.id}: {(f.reason or '')[:120]}")
        if c.facts_line:
            lines.append(f"  {'':<28} {c.facts_line}")
    steady = [(c, c.steady) for c in configs if c.steady is not None]
    if steady:
        lines.append("")
        lines.append("steady state after the warm start (scenario " + str(results.data.scenario) + ")")
        for c, s in steady:
            if s.status != "complete":
                lines.append(f"  {c.id:<28} {s.status}: {s.reason or ''}")
                continue
            lines.append(
                f"  {c.id:<28} {_f(s.output_tok_per_s, ',.0f')} output tok/s, {_f(s.req_per_s)} req/s, "
                f"TTFT p50 {_f(s.ttft_p50_ms, '.0f')} ms, ITL p50 {_f(s.itl_p50_ms, '.1f')} ms"
            )
    trade = results.data.tradeoffs
    if trade:
        lines.append("")
        lines.append(
            "trade-off against "
            + trade[0].vs
            + " (the guide: eager mode saves startup and usually costs steady-state speed)"
        )
        for t in trade:
            bits = []
            for kind, v in (("cold", t.cold_saved_s), ("warm", t.warm_saved_s)):
                if v is not None:
                    bits.append(f"{kind} start {abs(v):.2f}s {'faster' if v >= 0 else 'slower'}")
            if t.throughput_change is not None:
                bits.append(
                    f"steady output {t.throughput_change * 100:+.0f}% ({_f(t.output_tok_per_s, ',.0f')} vs "
                    f"{_f(t.vs_output_tok_per_s, ',.0f')} tok/s)"
                )
            if t.payback_s is not None:
                bits.append(
                    f"the later-ready config catches up in tokens {t.payback_s:.0f}s after it is up (at full load)"
                )
            lines.append(f"  {t.config_id}: " + ("; ".join(bits) or "no figures to compare"))
    return "\n".join(lines) + "\n"
