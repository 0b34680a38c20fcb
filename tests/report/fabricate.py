"""Fabricate run and sweep directories in the run-directory contract, for report tests.

The numbers are plausible rather than simulated: latencies are drawn from log-normal
distributions scaled by a `speed` factor (0.5 = twice as slow), histograms are real hdrh
encodings of the same samples, and the summary is computed from them, so reports, plots and
comparisons see consistent data. `make_run(..., omit=("summary.json",))` makes a crashed run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from harness.results.hdr import encode_values_b64
from harness.scenario.models import Scenario
from harness.workload.fingerprint import fingerprint

CLASSES = (("short", 0.6, 200, 60), ("long", 0.4, 1500, 120))  # name, weight, input, output tokens
SLO = {"ttft_ms": 400.0, "tpot_ms": 40.0}


def scenario_dict(
    name: str = "chat", concurrency: int = 16, requests: int = 200, temperature: float = 0.0, classes: tuple = CLASSES
) -> dict[str, Any]:
    return {
        "name": name,
        "seed": 7,
        "load": {"concurrency": concurrency, "requests": requests},
        "workload": {
            "classes": [{"name": c, "weight": w, "input_tokens": i, "output_tokens": o} for c, w, i, o in classes]
        },
        "sampling": {"temperature": temperature},
        "slo": dict(SLO),
        "warmup": {"requests": 8},
    }


def _dist(values: np.ndarray) -> dict[str, Any]:
    if values.size == 0:
        return {"count": 0}
    q = np.percentile(values, [50, 90, 99, 99.9])
    return {
        "count": int(values.size),
        "mean": float(values.mean()),
        "p50": float(q[0]),
        "p90": float(q[1]),
        "p99": float(q[2]),
        "p999": float(q[3]),
        "max": float(values.max()),
        "min": float(values.min()),
    }


def make_run(
    run_dir: Path,
    *,
    scenario: dict[str, Any] | None = None,
    speed: float = 1.0,
    seed: int = 0,
    n: int = 200,
    failed: int = 0,
    duration_s: float = 40.0,
    omit: tuple[str, ...] = (),
    truncate_requests: bool = False,
    telemetry: bool = True,
    preemption_rate: float = 0.2,
    warnings: tuple[str, ...] = (),
    status: str = "complete",
    classes: tuple = CLASSES,
    ttft_scale: dict[str, float] | None = None,
) -> Path:
    """Write a run directory; returns it. `ttft_scale`: class -> factor on its TTFT (one class slower)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    sc = scenario or scenario_dict(requests=n, classes=classes)
    fp = fingerprint(Scenario.model_validate(sc))
    rng = np.random.default_rng(seed)
    t0_ns = 1_700_000_000 * 10**9
    start_unix = 1_700_000_000.0
    duration = duration_s / speed  # a slower engine takes longer for the same requests

    records: list[dict[str, Any]] = []
    samples: dict[str, dict[str, list[float]]] = {}
    weights = np.array([c[1] for c in classes])
    class_idx = rng.choice(len(classes), size=n, p=weights / weights.sum())
    for i in range(n):
        name, _, inp, out = classes[class_idx[i]]
        intended = t0_ns + int(i * duration * 1e9 / n)
        sent = intended + int(rng.exponential(0.2e6))
        ttft = float(rng.lognormal(np.log((60 + inp * 0.08) / speed), 0.35)) * (ttft_scale or {}).get(name, 1.0)
        n_out = int(out)
        gaps: list[float] = []
        toks: list[int] = []
        left = n_out - 1
        while left > 0:
            k = 2 if (rng.random() < 0.1 and left >= 2) else 1
            gaps.append(float(rng.lognormal(np.log(18.0 * k / speed), 0.25)))
            toks.append(k)
            left -= k
        offsets = np.concatenate([[ttft], ttft + np.cumsum(gaps)]) if gaps else np.array([ttft])
        e2e = float(offsets[-1])
        tpot = (e2e - ttft) / (n_out - 1) if n_out > 1 else None
        err = "http_503" if i < failed else None
        rec = {
            "i": i,
            "class": name,
            "warmup": False,
            "intended_ns": intended,
            "sent_ns": sent,
            "ttft_ms": None if err else ttft,
            "e2e_ms": None if err else e2e,
            "tpot_ms": None if err else tpot,
            "send_lag_ms": (sent - intended) / 1e6,
            "input_tokens": None if err else inp,
            "output_tokens": None if err else n_out,
            "chunks": 0 if err else len(offsets),
            "chunk_offsets_us": [] if err else [int(o * 1000) for o in offsets],
            "chunk_tokens": [] if err else [1, *toks],
            "error": err,
        }
        records.append(rec)
        if err:
            continue
        for group in ("_all", name):
            s = samples.setdefault(
                group,
                {m: [] for m in ("ttft", "itl_chunk", "itl_token", "tpot", "e2e", "send_lag", "tokens_per_chunk")},
            )
            s["ttft"].append(ttft * 1e6)
            s["e2e"].append(e2e * 1e6)
            if tpot is not None:
                s["tpot"].append(tpot * 1e6)
            s["send_lag"].append(float(sent - intended))
            s["itl_chunk"].extend(g * 1e6 for g in gaps)
            for g, k in zip(gaps, toks, strict=False):
                s["itl_token"].extend([g / k * 1e6] * k)
            s["tokens_per_chunk"].extend([1, *toks])

    # a warmup record that must be ignored everywhere
    records.insert(0, {**records[0], "i": -1, "warmup": True, "ttft_ms": 99999.0, "e2e_ms": 99999.0})

    histograms = {
        group: {m: encode_values_b64(np.asarray(v)) for m, v in s.items() if v} for group, s in samples.items()
    }

    def block(group: str) -> dict[str, Any]:
        s = samples.get(group, {})
        sel = [r for r in records if not r["warmup"] and (group == "_all" or r["class"] == group)]
        ok = [r for r in sel if not r["error"]]
        good = [r for r in ok if r["ttft_ms"] <= SLO["ttft_ms"] and (r["tpot_ms"] or 0) <= SLO["tpot_ms"]]
        inp = sum(r["input_tokens"] for r in ok)
        out = sum(r["output_tokens"] for r in ok)
        return {
            "requests": {
                "completed": len(ok),
                "failed": len(sel) - len(ok),
                "rps": len(ok) / duration,
                "errors_by_kind": {"http_503": len(sel) - len(ok)} if len(sel) > len(ok) else {},
            },
            "tokens": {
                "input_total": inp,
                "output_total": out,
                "input_per_s": inp / duration,
                "output_per_s": out / duration,
            },
            "latency_ms": {
                m: _dist(np.asarray(s.get(m, [])) / 1e6)
                for m in ("ttft", "itl_chunk", "itl_token", "tpot", "e2e", "send_lag")
            },
            "tokens_per_chunk": _dist(np.asarray(s.get("tokens_per_chunk", []))),
            "goodput": {
                "good": len(good),
                "total": len(sel),
                "fraction": len(good) / max(1, len(sel)),
                "rps": len(good) / duration,
            },
        }

    overall = block("_all")
    per_class = {c[0]: block(c[0]) for c in classes if c[0] in samples}
    kv = np.clip(
        0.35 + 0.5 * (1 - np.exp(-np.arange(int(duration)) / 8.0)) / speed * 0.8 + rng.normal(0, 0.02, int(duration)),
        0,
        1,
    )
    preempt_count = int(preemption_rate * duration / speed)
    summary = {
        "schema_version": 1,
        "harness_version": "0.1.0",
        "scenario": {"name": sc["name"], "fingerprint": fp},
        "target": {"url": "http://127.0.0.1:8000", "api": "openai-chat", "model": "sim-model"},
        "window": {"start": start_unix, "end": start_unix + duration, "duration_s": duration, "warmup_s": 3.0},
        "load": {"mode": "closed", "concurrency": sc["load"].get("concurrency")},
        "requests": overall["requests"],
        "tokens": overall["tokens"],
        "latency_ms": overall["latency_ms"],
        "tokens_per_chunk": overall["tokens_per_chunk"],
        "per_class": {k: {kk: vv for kk, vv in v.items()} for k, v in per_class.items()},
        "goodput": {
            "overall": overall["goodput"],
            "per_class": {k: v["goodput"] for k, v in per_class.items()},
        },
        "usage_check": {"prompt_tokens_mean_diff": 0.0, "max_diff": 0},
        "timing": {"clock": "kernel", "coalesced_reads": 3},
        "client": {"cpu_max_pct": 41.0, "cpu_mean_pct": 22.0, "processes": 1},
        "engine": {
            "profile": "vllm",
            "kv_usage": {
                "mean": float(kv.mean()),
                "p50": float(np.median(kv)),
                "p99": float(np.percentile(kv, 99)),
                "max": float(kv.max()),
            },
            "kv_capacity_tokens": 120000,
            "preemptions": {"count": preempt_count, "per_s": preempt_count / duration},
            "prefix_cache": {"queries": 80000, "hits": 24000, "hit_rate": 0.3, "expected_hit_rate": 0.32},
            "running": {"mean": 12.5, "max": 16},
            "waiting": {"mean": 1.2, "max": 6},
            "spec_decode": None,
            "gpu_memory": {
                "available": True,
                "source": "nvml",
                "used_max_bytes": int(71.5 * 2**30),
                "total_bytes": 80 * 2**30,
            },
            "engine_latency_ms": {},
            "telemetry": {"source": "metrics", "scrapes": int(duration), "missing_reason": None},
        }
        if telemetry
        else {
            "telemetry": {"source": "none", "scrapes": 0, "missing_reason": "connection refused at /metrics"},
            "gpu_memory": {"available": False},
        },
        "validity": {"ok": not warnings, "warnings": list(warnings)},
        "status": status,
    }

    files: dict[str, str] = {
        "summary.json": json.dumps(summary, indent=1),
        "histograms.json": json.dumps(histograms),
        "scenario.yaml": yaml.safe_dump(sc, sort_keys=False),
    }
    req_text = "".join(json.dumps(r) + "\n" for r in records)
    if truncate_requests:
        req_text = req_text[: len(req_text) - 40]  # half a last line, as a crash leaves it
    files["requests.jsonl"] = req_text
    if telemetry:
        em = []
        pre = 0
        for k in range(int(duration)):
            pre += int(rng.random() < preemption_rate / speed)
            em.append(
                {
                    "t": start_unix + k,
                    "kv_usage": float(kv[k]),
                    "running": int(min(16, 4 + k)),
                    "waiting": int(max(0, (k % 10) - 6)),
                    "preemptions_total": pre,
                    "prompt_tokens_total": int(k * 600 * speed),
                    "generation_tokens_total": int(k * 250 * speed),
                    "prefix_hits_total": k * 100,
                    "prefix_queries_total": k * 330,
                }
            )
        em.append(
            {"t": start_unix + duration, "kv_usage": None, "running": None, "waiting": None}
        )  # a scrape with gaps
        files["engine_metrics.jsonl"] = "".join(json.dumps(e) + "\n" for e in em)
    prog = []
    done = 0
    for k in range(-3, int(duration) + 1):
        done = max(0, int(n * k / duration))
        prog.append(
            {
                "t": start_unix + k,
                "elapsed_s": k + 3,
                "done": done,
                "failed": 0,
                "in_flight": 16,
                "output_tokens": int(done * 90),
                "phase": "warmup" if k < 0 else "measure",
            }
        )
    files["progress.jsonl"] = "".join(json.dumps(p) + "\n" for p in prog)
    for name, text in files.items():
        if name not in omit:
            (run_dir / name).write_text(text)
    return run_dir


def make_sweep(
    sweep_dir: Path,
    *,
    configs: dict[str, float] | None = None,
    failed_config: str | None = "c3-seqs512",
    scenarios: tuple[str, ...] = ("chat-short", "chat-long"),
    repeats: int = 1,
    speed_scale: float = 1.0,
    seed: int = 0,
    n: int = 120,
    warnings: dict[str, tuple[str, ...]] | None = None,
) -> Path:
    """A sweep of configs (id -> speed) × scenarios; `failed_config` fails to start; `warnings`:
    cell id -> validity warnings of that cell's run."""
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    configs = configs or {"c0-base": 1.0, "c1-seqs128": 1.25, "c2-seqs256": 0.9}
    if failed_config and failed_config not in configs:
        configs = {**configs, failed_config: 1.0}
    cells = []
    rows = ["config_id,scenario,repeat,status"]
    k = 0
    for cfg_i, (cfg, speed) in enumerate(configs.items()):
        flags = {"max-num-seqs": 64 * 2**cfg_i}
        for sc_i, sc_name in enumerate(scenarios):
            for rep in range(repeats):
                cell_id = f"{cfg}__{sc_name}__r{rep}"
                if cfg == failed_config:
                    cells.append(
                        {
                            "id": cell_id,
                            "config_id": cfg,
                            "flags": flags,
                            "scenario": sc_name,
                            "repeat": rep,
                            "status": "failed",
                            "run_dir": None,
                            "startup_s": None,
                            "startup_facts": {},
                            "reason": "engine exited during startup: CUDA out of memory (see logs/c3-seqs512.log)",
                        }
                    )
                    rows.append(f"{cfg},{sc_name},{rep},failed")
                    continue
                rel = f"runs/{cell_id}"
                sc = scenario_dict(name=sc_name, concurrency=8 * (sc_i + 1), requests=n)
                make_run(
                    sweep_dir / rel,
                    scenario=sc,
                    speed=speed * speed_scale,
                    seed=seed + 1000 * k + rep,
                    n=n,
                    duration_s=30.0 * (sc_i + 1),
                    warnings=(warnings or {}).get(cell_id, ()),
                )
                k += 1
                cells.append(
                    {
                        "id": cell_id,
                        "config_id": cfg,
                        "flags": flags,
                        "scenario": sc_name,
                        "repeat": rep,
                        "status": "complete",
                        "run_dir": rel,
                        "startup_s": 42.0 + cfg_i,
                        "startup_facts": {"kv_cache_tokens": 100000 * (cfg_i + 1)},
                        "reason": None,
                    }
                )
                rows.append(f"{cfg},{sc_name},{rep},complete")
    (sweep_dir / "index.json").write_text(json.dumps({"sweep": "max-num-seqs", "cells": cells}, indent=1))
    (sweep_dir / "sweep.yaml").write_text(
        yaml.safe_dump(
            {
                "engine": {"kind": "sim", "command": ["harness", "sim", "--port", "{port}"]},
                "vary": {"max-num-seqs": [64, 128, 256, 512]},
            }
        )
    )
    (sweep_dir / "summary.csv").write_text("\n".join(rows) + "\n")
    return sweep_dir
