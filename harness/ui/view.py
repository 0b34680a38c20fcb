"""The web UI's view model: one dict for /llm/api/live and the rows of Locust's LLM tabs."""

from __future__ import annotations

from typing import Any

from harness.metrics.recorder import ALL
from harness.metrics.table import shown
from harness.results.models.engine import EngineBlock
from harness.ui.live import chart_specs, specs
from harness.ui.live import class_view as _class_view

UI_STATS = ("p50", "p90", "p99")  # the LLM tab's percentile columns per metric

_STATE_TEXT = {
    "idle": "idle: start a test from the form",
    "starting": "starting (preflight, telemetry)",
    "warmup": "warming up (not measured)",
    "measuring": "measuring",
    "draining": "draining: in-flight requests finish",
    "finishing": "writing summary.json",
    "finished": "finished",
    "error": "error",
}


def engine_view(run: Any) -> dict[str, Any]:
    if run.telemetry is None:
        return {"enabled": False}
    if run.summary is not None and "kv_usage" in run.summary.engine.model_fields_set:
        return _engine_over_window(run.summary.engine)
    live = run.telemetry.live() or {}
    out: dict[str, Any] = {
        "enabled": True,
        "ok": bool(live.get("ok")),
        "error": live.get("error"),
        "profile": live.get("profile"),
    }
    for key in ("kv_usage", "running", "waiting"):
        out[key] = live.get(key)
    total = live.get("preemptions_total")
    if total is not None:
        run.engine_base.setdefault("preemptions_total", total)
        out["preemptions"] = total - run.engine_base["preemptions_total"]
    q, h = live.get("prefix_queries_total"), live.get("prefix_hits_total")
    if q is not None and h is not None:
        run.engine_base.setdefault("prefix_queries_total", q)
        run.engine_base.setdefault("prefix_hits_total", h)
        dq = q - run.engine_base["prefix_queries_total"]
        out["prefix_hit_rate"] = (h - run.engine_base["prefix_hits_total"]) / dq if dq > 0 else None
    return out


def build_view(s: Any) -> dict[str, Any]:
    """What /llm/api/live returns (and the LLM tabs show) for a RunSession `s`."""
    base = s.base_path()
    run = s.run
    runner = s.env.runner
    out: dict[str, Any] = {
        "state": s.state,
        "error": s.error,
        "locust_state": getattr(runner, "state", None),
        "users": int(getattr(runner, "user_count", 0) or 0),
        "scenario_path": getattr(s.opts, "scenario", ""),
        "scenarios": s.choices.names(),
        "host": s.env.host,
        "simulated": s.sim is not None and s.env.host == s.sim.url,
        "charts": chart_specs(),  # the metric table's live charts; the page draws one per entry
        "metrics": specs("ui_table"),  # its p99 cards and per-class percentile columns
    }
    if run is None:
        return out
    totals = s.collector.totals()
    load = run.scenario.load
    out.update(
        {
            "run": run.name,
            "run_dir": str(run.dir.root.resolve()),
            "scenario": run.scenario.name,
            "target": run.target_url,
            "model": run.info.get("model"),
            "mode": "open" if load.open_loop else "closed",
            "rate": load.rate,
            "duration_s": None if run.until_stopped else load.duration_s,
            "requests_target": load.requests,
            "elapsed_s": totals.get("elapsed_s", 0.0),
            "workers": s.collector.n,
            "progress": totals,
            "engine": engine_view(run),
            "series": run.live.series,
            "files": f"{base}/llm/runs/{run.name}/",
        }
    )
    rates = run.live.rates()
    out["rates_over"] = "last 10 s"
    if run.summary is not None:  # finished: whole-window rates, as in summary.json
        summary = run.summary
        rates = {name: {"rps": c.requests.rps, "tok_s": c.tokens.output_per_s} for name, c in summary.per_class.items()}
        rates[ALL] = {"rps": summary.requests.rps, "tok_s": summary.tokens.output_per_s}
        out["rates_over"] = "whole run"
    # finished: the run's own metrics (what summary.json and the report say); live deltas before
    classes = (run.final_metrics if run.final_metrics is not None else run.live.total).classes
    rows = [_class_view(name, cm, rates.get(name)) for name, cm in classes.items() if name != ALL]
    rows.append(_class_view("All classes", classes[ALL], rates.get(ALL)))
    out["classes"] = rows
    out["errors"] = rows[-1]["errors"]
    if run.summary is not None:
        summary = run.summary
        out["final"] = {
            "status": summary.status,
            "rps": summary.requests.rps,
            "tok_s": summary.tokens.output_per_s,
            "window_s": summary.window.duration_s,
            "completed": summary.requests.completed,
            "failed": summary.requests.failed,
            "warnings": list(summary.validity.warnings),
        }
    out["report"] = run.report
    if run.report == "ok":
        out["report_url"] = f"{base}/llm/runs/{run.name}/report.html"
    if run.summary is not None:
        out["summary_url"] = f"{base}/llm/runs/{run.name}/summary.json"
    return out


def llm_rows(view: dict[str, Any]) -> list[dict[str, str]]:
    rows = []
    for c in view.get("classes", []):
        rps, tok_s = c["rps"], c["tok_s"]
        rows.append(
            {
                "cls": c["name"],
                "requests": f"{c['requests']:,}",
                "fails": f"{c['failed']:,}",
                "rps": f"{rps:,.2f}",
                "tok_s": f"{tok_s:,.0f}",
                **{f"{m.short}_{p}": _ms(c[m.short][p], m.digits) for m in shown("ui_table") for p in UI_STATS},
            }
        )
    return rows


def run_rows(view: dict[str, Any], base: str) -> list[dict[str, str]]:
    rows: list[tuple[str, str]] = [("State", _STATE_TEXT.get(view["state"], view["state"]))]
    for line in view.get("error") or []:
        rows.append(("Error", line))
    if "run" in view:
        elapsed = view.get("elapsed_s") or 0.0
        dur = view.get("duration_s")
        final = view.get("final")
        if final:  # the window summary.json reports (incl. the drain), as the Result row says
            rows.append(
                (
                    "Measured window",
                    f"{final['window_s']:,.1f} s (incl. drain)" + (f"; {dur:,.0f} s asked" if dur else ""),
                )
            )
        else:
            rows.append(("Measured window", f"{elapsed:,.1f} s" + (f" of {dur:,.0f} s" if dur else "")))
        p = view["progress"]
        rows.append(
            (
                "Requests sent / done / failed / in flight",
                f"{p.get('sent', 0):,} / {p.get('done', 0):,} / {p.get('failed', 0):,} / {p.get('in_flight', 0):,}",
            )
        )
        rows.append(("Load processes", str(view.get("workers", 0))))
        e = view.get("engine", {})
        if e.get("enabled"):
            if e.get("over"):
                rows.append(("Engine values", e["over"]))
            if e.get("ok"):
                rows.append(("Engine KV cache usage", _pct(e.get("kv_usage"))))
                rows.append(
                    ("Engine requests running / waiting", f"{_num(e.get('running'))} / {_num(e.get('waiting'))}")
                )
                rows.append(("Engine preemptions (this test)", _num(e.get("preemptions"))))
                if e.get("prefix_hit_rate") is not None:
                    rows.append(("Engine prefix cache hit rate (this test)", _pct(e.get("prefix_hit_rate"))))
            else:
                rows.append(("Engine telemetry", e.get("error") or "waiting for the first scrape"))
        else:
            rows.append(("Engine telemetry", "off"))
        for kind, n in (view.get("errors") or {}).items():
            rows.append((f"Errors: {kind}", f"{n:,}"))
        final = view.get("final")
        if final:
            rows.append(
                (
                    "Result",
                    f"{final['status']}: {final['completed']:,} requests in "
                    f"{final['window_s']:,.1f} s, {final['rps']:,.2f} req/s, {final['tok_s']:,.0f} tok/s",
                )
            )
            for w in final["warnings"]:
                rows.append(("Warning", w))
        rows.append(("Run directory", view["run_dir"]))
        report = view.get("report")
        if view.get("report_url"):
            rows.append(("Report", view["report_url"]))
        elif report:
            rows.append(("Report", {"writing": "writing ...", "off": "off (--no-report)"}.get(report, report)))
    rows.append(("Live dashboard", f"{base}/llm"))
    return [{"item": k, "value": v} for k, v in rows]


def _ms(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _num(value: Any) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _engine_over_window(engine: EngineBlock) -> dict[str, Any]:
    """After the run the engine cards show the measured window (max; preemptions and prefix hits
    over it), from summary.json, not the idle engine's current 0 % (audit D14)."""
    return {
        "enabled": True,
        "ok": True,
        "error": None,
        "profile": engine.profile,
        "over": "over the measured window (max; preemptions and prefix hits: totals)",
        "kv_usage": engine.kv_usage.max,
        "running": engine.running.max,
        "waiting": engine.waiting.max,
        "preemptions": engine.preemptions.count,
        "prefix_hit_rate": engine.prefix_cache.hit_rate,
    }
