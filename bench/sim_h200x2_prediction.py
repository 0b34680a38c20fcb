"""The calibrated simulator's prediction for issue 30 (tp 2 x 1 engine vs tp 1 x 2 replicas on two
H200s) as a table in real-speed terms, with the winner per scenario and load: what the real run
(bench/gpu/h200x2_tp_vs_replicas.sh sweep) is to be checked against.

    python bench/sim_h200x2_prediction.py SWEEP_DIR [--out SWEEP_DIR/prediction.md]

SWEEP_DIR: harness sweep bench/gpu/vllm/sim/tp_vs_replicas.yaml --out SWEEP_DIR (the simulator at
--sim-speed S: latencies x S and rates / S give the real-speed figures, as bench/sim_vs_h200.py).
Throughput per GPU divides by 2 for every config (2 GPUs either way). No goodput column: the
simulator's runs judge the SLOs on slowed-down latencies. With a real run's sweep
directory (speed 1) it prints the same table for the measurement.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_vs_h200 import dig, fmt, rescale

GPUS = 2


def cells(sweep: Path) -> list[dict]:
    out = []
    for cell in json.loads((sweep / "index.json").read_text())["cells"]:
        if cell.get("status") != "complete":
            continue
        s = json.loads((sweep / cell["run_dir"] / "summary.json").read_text())
        speed = float((cell.get("flags") or {}).get("sim-speed", 1))
        out.append(
            {
                "config": cell["config_id"],
                "scenario": cell["scenario"],
                "users": s["load"].get("concurrency"),
                "s": rescale(s, speed),
            }
        )
    return out


def kv_per_replica(s: dict) -> str:
    engines = dig_list(s, ("fleet", "engines"))
    if engines:
        return " / ".join(fmt(dig(e, ("kv_usage", "max")), 2) for e in engines)
    return fmt(dig(s, ("engine", "kv_usage", "max")), 2)


def dig_list(d: dict[str, Any] | None, path: tuple[str, ...]) -> list[Any]:
    v: Any = d
    for k in path:
        v = (v or {}).get(k)
    return v if isinstance(v, list) else []


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| scenario | users | config | TTFT p50 / p99 ms | ITL p50 / p99 ms | req/s | out tok/s per GPU | "
        "KV max per replica | prefix hit rate | cross-replica prefix overlap | busiest replica / mean |",
        "|---|---:|---|---|---|---:|---:|---|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["scenario"], r["users"], r["config"])):
        s = r["s"]
        ttft = f"{fmt(dig(s, ('latency_ms', 'ttft', 'p50')))} / {fmt(dig(s, ('latency_ms', 'ttft', 'p99')))}"
        itl = f"{fmt(dig(s, ('latency_ms', 'itl_token', 'p50')))} / {fmt(dig(s, ('latency_ms', 'itl_token', 'p99')))}"
        out_tok = dig(s, ("tokens", "output_per_s"))
        hit = dig(s, ("cache", "hit_rate"))  # from usage; else the engines' own counters (fleet: summed)
        if hit is None:
            hit = dig(s, ("engine", "prefix_cache", "hit_rate"))
        overlap = dig(s, ("fleet", "prefix_overlap"))
        bal = dig(s, ("fleet", "balance", "requests_max_over_mean"))
        lines.append(
            f"| {r['scenario']} | {r['users']} | {r['config']} | {ttft} | {itl} | {fmt(dig(s, ('requests', 'rps')))} | "
            f"{fmt(None if out_tok is None else out_tok / GPUS, 0)} | {kv_per_replica(s)} | "
            f"{'-' if hit is None else f'{100 * hit:.0f}%'} | {'-' if overlap is None else f'{100 * overlap:.0f}%'} | {fmt(bal, 2)} |"
        )
    return lines


def winners(rows: list[dict]) -> list[str]:
    """Per scenario and load: the config with the most output tokens/s (fleet throughput per GPU) and
    the one with the lowest TTFT p50 (per-request latency)."""
    out = []
    for key in sorted({(r["scenario"], r["users"]) for r in rows}):
        group = [r for r in rows if (r["scenario"], r["users"]) == key]
        thr = max(group, key=lambda r: dig(r["s"], ("tokens", "output_per_s")) or 0)
        lat = min(group, key=lambda r: dig(r["s"], ("latency_ms", "ttft", "p50")) or float("inf"))
        base = {r["config"]: dig(r["s"], ("tokens", "output_per_s")) or 0 for r in group}
        ratio = ", ".join(f"{c} {v / max(base.values()):.2f}" for c, v in sorted(base.items()))
        out.append(
            f"- {key[0]} at {key[1]} users: throughput {thr['config']} (output tokens/s relative to the best: {ratio}); "
            f"TTFT p50 {lat['config']}"
        )
    return out


def main(argv: list[str]) -> int:
    sweep = Path(argv[0])
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else sweep / "prediction.md"
    rows = cells(sweep)
    text = [
        "# tp 2 x 1 engine vs tp 1 x 2 replicas on two H200s: the calibrated simulator's prediction",
        "",
        f"`python bench/sim_h200x2_prediction.py {sweep}` over `harness sweep bench/gpu/vllm/sim/tp_vs_replicas.yaml` "
        "(profile h200-llama8b-vllm026; figures in real-speed terms). Per GPU = fleet / 2 for every config. "
        "The sweep's own report.md and summary.csv beside this file are at the simulator's --sim-speed "
        "(0.25: latencies 4x, rates 1/4). On the shared 2-core box every cell carries validity warnings (host "
        "stalls; the simulator 2-12% behind its schedule in most; first and last slices not in steady state): "
        "differences of a few percent are not decided.",
        "",
        *table(rows),
        "",
        "Winners:",
        *winners(rows),
        "",
    ]
    out.write_text("\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
