#!/usr/bin/env python3
"""Write the Grafana dashboards in grafana/dashboards/ (stdlib only; run from anywhere).

    python grafana/generate.py           # rewrite the JSON files
    python grafana/generate.py --check   # exit 1 when a file differs from what this script writes

The JSON files are committed; edit the boards (tuning_board.py, engine_boards.py; building blocks
in dashboard.py), not the JSON, and re-run this script. Conventions:
- Every panel and target uses the `${datasource}` variable.
- Engine metric names are matched in both spellings, `{__name__=~"vllm[:_]..."}`: recent
  prometheus_client versions escape `vllm:` to `vllm_` in OpenMetrics scrapes (Prometheus
  negotiates OpenMetrics), older ones and the plain text format keep the colon.
- The tuning dashboard is engine-agnostic where vLLM and SGLang share a meaning
  (`vllm[:_]x|sglang[:_]y`), and has one target per engine where they do not.
- Client-side (harness_) series carry `run`, `scenario`, `config`, `model` labels (see
  harness/metrics/exporter.py); `$config` and `$run` filter them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the harness of this checkout
from engine_boards import sglang_board, vllm_board  # this folder: sys.path[0]
from tuning_board import tuning

OUT = Path(__file__).resolve().parent / "dashboards"

BOARDS = {"tuning.json": tuning, "vllm.json": vllm_board, "sglang.json": sglang_board}


def render() -> dict[str, str]:
    return {name: json.dumps(fn().to_json(), indent=2) + "\n" for name, fn in BOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a dashboard file is out of date")
    args = ap.parse_args(argv)
    stale = []
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        path = OUT / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print("out of date (run python grafana/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
