"""Client cost per output token: plain classes vs multi-turn sessions vs sessions on a two-replica
fleet with prefix-affinity routing (and a LoRA adapter mix) vs agentic sessions (tool calls; with
sub-agent fan-out) vs a hash-block trace replay. Each case is a `harness run` against
the built-in simulator in scripted mode (fixed TTFT and ITL, so the engine side is the same for
every case); the figure is the load process's CPU time over the window (summary.json client
cpu_mean_pct x window) divided by the output tokens. The cases run in turn, `--rounds` times
(interleaved, so a neighbour's burst does not land on one case only); the median is printed.
Prints figures; asserts nothing.

    python bench/traffic_client_cost.py [--duration 15] [--users 16] [--rounds 3] [--cases plain,agentic]

On a shared machine the figures move with the neighbours' load: compare cases of one invocation.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIM = "--scripted-ttft-ms 20 --scripted-itl-ms 4"

CASES: dict[str, dict[str, Any]] = {
    "plain classes": {
        "workload": {
            "classes": [{"name": "a", "input_tokens": {"dist": "uniform", "min": 200, "max": 600}, "output_tokens": 64}]
        }
    },
    "sessions": {
        "workload": {
            "classes": [
                {
                    "name": "chat",
                    "session": {
                        "turns": 4,
                        "user_tokens": {"dist": "uniform", "min": 50, "max": 150},
                        "output_tokens": 64,
                        "system_prompt": {"tokens": 256, "count": 4},
                    },
                }
            ]
        }
    },
    "sessions + 2 replicas (prefix-affinity) + adapters": {
        "target": {"replicas": 2, "routing": "prefix-affinity"},
        "workload": {
            "adapters": {"names": ["x", "y", "z"], "zipf": 1.0},
            "classes": [
                {
                    "name": "chat",
                    "session": {
                        "turns": 4,
                        "user_tokens": {"dist": "uniform", "min": 50, "max": 150},
                        "output_tokens": 64,
                        "system_prompt": {"tokens": 256, "count": 4},
                    },
                }
            ],
        },
    },
    "agentic sessions (tool calls)": {
        "workload": {
            "classes": [
                {
                    "name": "agent",
                    "session": {
                        "turns": 2,
                        "user_tokens": {"dist": "uniform", "min": 50, "max": 150},
                        "output_tokens": 64,
                        "system_prompt": {"tokens": 256, "count": 4},
                        "agent": {
                            "tool_calls": {"dist": "uniform", "min": 1, "max": 3},
                            "call_tokens": 64,
                            "tool_result_tokens": 200,
                            "tool_latency_s": 0.05,
                        },
                    },
                }
            ]
        }
    },
    "agentic sessions + fan-out to 3 sub-agents": {
        "workload": {
            "classes": [
                {
                    "name": "agent",
                    "session": {
                        "turns": 2,
                        "user_tokens": {"dist": "uniform", "min": 50, "max": 150},
                        "output_tokens": 64,
                        "system_prompt": {"tokens": 256, "count": 4},
                        "agent": {
                            "tool_calls": {"dist": "uniform", "min": 1, "max": 3},
                            "call_tokens": 64,
                            "tool_result_tokens": 200,
                            "tool_latency_s": 0.05,
                            "fan_out": {
                                "probability": 0.5,
                                "agents": 3,
                                "steps": 2,
                                "task_tokens": 64,
                                "result_tokens": 64,
                            },
                        },
                    },
                }
            ]
        }
    },
    "hash-block trace replay (closed loop)": {
        "workload": {
            "classes": [
                {
                    "name": "trace",
                    "block_trace": {"path": str(ROOT / "scenarios" / "traces" / "mooncake_synthetic.jsonl")},
                }
            ]
        }
    },
}
SHORT = {
    "plain": "plain classes",
    "sessions": "sessions",
    "fleet": "sessions + 2 replicas (prefix-affinity) + adapters",
    "agentic": "agentic sessions (tool calls)",
    "fanout": "agentic sessions + fan-out to 3 sub-agents",
    "trace": "hash-block trace replay (closed loop)",
}


def run_case(name: str, extra: dict, duration: int, users: int, tmp: Path) -> dict:
    scenario = {"name": "cost", "seed": 1, "load": {"concurrency": users, "duration_s": duration}, **extra}
    path = tmp / f"{len(list(tmp.iterdir()))}.yaml"
    path.write_text(json.dumps(scenario))
    out = tmp / (path.stem + "-run")
    sim_args = SIM + (" --max-loras 3" if "adapters" in extra.get("workload", {}) else "")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(path),
            "--out",
            str(out),
            "--quiet",
            "--no-report",
            f"--sim-args={sim_args}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if p.returncode != 0:
        raise SystemExit(f"{name}: exit {p.returncode}: {p.stderr[-2000:]}")
    s = json.loads((out / "summary.json").read_text())
    cpu_s = (s["client"]["cpu_mean_pct"] or 0) / 100 * s["window"]["duration_s"]
    tokens = s["tokens"]["output_total"]
    return {
        "requests": s["requests"]["completed"],
        "tokens": tokens,
        "cpu_pct": s["client"]["cpu_mean_pct"],
        "us_per_token": 1e6 * cpu_s / tokens if tokens else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--users", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--cases", default=",".join(SHORT), help=f"comma list of {', '.join(SHORT)}")
    args = ap.parse_args()
    names = [SHORT[c.strip()] for c in args.cases.split(",") if c.strip()]
    results: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print(
            f"client CPU per output token, {args.users} users, {args.duration} s, scripted simulator ({SIM}), "
            f"{args.rounds} round(s)"
        )
        for _ in range(args.rounds):
            for name in names:
                results[name].append(run_case(name, CASES[name], args.duration, args.users, tmp))
        for name in names:
            rs = sorted(results[name], key=lambda r: r["us_per_token"])
            r = rs[len(rs) // 2]
            each = " / ".join(f"{x['us_per_token']:.1f}" for x in results[name])
            print(
                f"  {name:<52} {r['us_per_token']:7.1f} us/token median ({each})   (CPU {r['cpu_pct']:.1f}%, "
                f"{r['requests']} requests, {r['tokens']} tokens)"
            )


if __name__ == "__main__":
    main()
