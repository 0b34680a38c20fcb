"""A stand-in for `transformers serve` on a machine without a GPU: the same command line, the
simulated engine behind it.

It accepts exactly the options of `transformers serve` (transformers 5.x) that the GPU tune file
uses, refuses any other one the way typer does (`No such option: --max-model-len`, exit 2), and
runs `python -m harness.sim` with the equivalent vLLM flags (`--cb-max-batch-tokens` ->
`--max-num-batched-tokens`, `--no-cb-use-cuda-graph` -> `--enforce-eager`, `--cb-num-blocks` of
256-token blocks -> `--num-gpu-blocks-override` of 16-token blocks). Options starting `--sim-`
and `--startup-delay` pass through (speed and GPU shape for tests).

    python tests/tune/fake_transformers_serve.py serve MODEL --host H --port P --continuous-batching ...
"""

from __future__ import annotations

import os
import sys

TF_BLOCK = 256
SIM_BLOCK = 16
VALUED = {
    "--host",
    "--port",
    "--dtype",
    "--log-level",
    "--cb-num-blocks",
    "--cb-block-size",
    "--cb-max-batch-tokens",
    "--cb-max-memory-percent",
    "--attn-implementation",
    "--device",
}
SWITCHES = {
    "--continuous-batching",
    "--no-continuous-batching",
    "--cb-use-cuda-graph",
    "--no-cb-use-cuda-graph",
    "--compile",
    "--no-compile",
    "--force-model",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "serve":
        print("Usage: transformers serve MODEL [OPTIONS]", file=sys.stderr)
        return 2
    args = argv[1:]
    sim = [sys.executable, "-m", "harness.sim"]
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--sim-") or a == "--startup-delay":
            sim += [a, args[i + 1]]
            i += 2
            continue
        if not a.startswith("-"):
            sim += ["--served-model-name", a]
            i += 1
            continue
        name, _, inline = a.partition("=")
        if name in SWITCHES:
            if name == "--no-cb-use-cuda-graph":
                sim.append("--enforce-eager")
            i += 1
            continue
        if name not in VALUED:
            print(f"Error: No such option: {name}", file=sys.stderr)
            return 2
        value = inline or args[i + 1]
        i += 1 if inline else 2
        if name in ("--host", "--port", "--dtype"):
            sim += [name, value]
        elif name == "--cb-max-batch-tokens":
            sim += ["--max-num-batched-tokens", value]
        elif name == "--cb-num-blocks":
            sim += ["--num-gpu-blocks-override", str(int(value) * TF_BLOCK // SIM_BLOCK)]
        elif name == "--cb-max-memory-percent":
            sim += ["--gpu-memory-utilization", value]
    os.execv(sys.executable, sim)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
