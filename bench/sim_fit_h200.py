"""Fit the simulated engine's cost model to vLLM 0.26.0 on the H200 (Llama-3-8B shape) and print
the profile `harness sim --profile h200-llama8b-vllm026` ships (harness/sim/profiles.py).

    python bench/sim_fit_h200.py [RESULTS_DIR]      (default results/examples)   --check: exit 1 if the shipped profile differs

Fit data (everything else is held out for bench/sim_vs_h200.py):
  decode step   ITL p50 of calib_decode at 1 and 8 users and chat at 1 and 8 users (decode-only
                steps): step = overhead + sequences x per-sequence cost + (weights + context x KV bytes) / bandwidth
  prefill       TTFT p50 at one user for 1,034 (calib_decode) and 4,106 (calib_prefill) prompt
                tokens: TTFT = request overhead + step overhead + prompt x 2 x parameters / FLOPS
  API server    the part of TTFT outside the engine (the runs' ttft_breakdown: TTFT - vLLM's own queue
                and prefill times) of chat at 1 and 8 users: the growth per other running sequence
                (8 users: 7 others x the running share) is the API server's delay per running sequence
  memory        the startup log of the default start: GPU total, weights, graph pool, KV GiB
  startup       harness startup's graphs config (cold and warm): load, compile cold/warm, KV
                profiling cold/warm, capture, rest (the eager config's phases are held out)
  eager         the one eager measurement there is (startup's steady state, chat at 64 users):
                eager step overhead = graphs' overhead + ITL p50 eager - ITL p50 graphs
The model's constants: 8.03 B parameters, 2 bytes each; KV 2 x 32 layers x 8 heads x 128 x 2 B = 128 KiB per token.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

PARAMS = 8.03e9
WEIGHT_BYTES = PARAMS * 2
KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2
GIB = 2**30
TEMPLATE = 10  # the chat template's tokens the server adds (the runs' usage check: +10.0 per request)


def summary(root: Path, sweep: str, cell: str) -> dict:
    return json.loads((root / sweep / "runs" / cell / "summary.json").read_text())


def mean_context(s: dict) -> float:
    """Mean tokens in a running sequence's context: its prompt plus half its output."""
    t, n = s["tokens"], s["requests"]["completed"]
    return (t["input_total"] + t["output_total"] / 2) / n + TEMPLATE


def fit(root: Path) -> dict:
    # decode: ITL p50 = o + n s + (W + n ctx k) / B, n = mean running sequences
    rows, y = [], []
    for scen, users in (("calib_decode", 1), ("calib_decode", 8), ("chat", 1), ("chat", 8)):
        s = summary(root, "gpu-h200-vllm-curve", f"base__{scen}__concurrency={users}__r1")
        n = s["engine"]["running"]["mean"] or users
        ctx = n * mean_context(s)
        rows.append([1.0, n, WEIGHT_BYTES + ctx * KV_PER_TOKEN])
        y.append(s["latency_ms"]["itl_token"]["p50"] / 1000)
    (o, per_seq, inv_bw), *_ = np.linalg.lstsq(np.array(rows), np.array(y), rcond=None)
    # prefill at one user: TTFT p50 = r + L x 2 P / F (r holds the request and step overheads)
    lens, ttft = [], []
    for scen in ("calib_decode", "calib_prefill"):
        s = summary(root, "gpu-h200-vllm-curve", f"base__{scen}__concurrency=1__r1")
        lens.append(s["tokens"]["input_total"] / s["requests"]["completed"] + TEMPLATE)
        ttft.append(s["latency_ms"]["ttft"]["p50"] / 1000)
    slope = (ttft[1] - ttft[0]) / (lens[1] - lens[0])
    r = ttft[0] - slope * lens[0]
    flops = 2 * PARAMS / slope
    # the API server: its part of TTFT grows with the sequences it streams (chat at 1 and 8 users)
    net = {}
    for users in (1, 8):
        s = summary(root, "gpu-h200-vllm-curve", f"base__chat__concurrency={users}__r1")
        others = (users - 1) * (s["engine"]["running"]["mean"] or users) / users
        net[users] = (s["ttft_breakdown"]["mean_ms"]["network"], others)
    frontend_seq_ms = (net[8][0] - net[1][0]) / (net[8][1] - net[1][1])
    # memory from the default start's log
    facts = json.loads((root / "gpu-h200-vllm-curve" / "index.json").read_text())["cells"][0]["startup_facts"]
    graph_gib = facts["graph_capture_gib"]
    total_gib = 139.8  # vLLM's figure for the H200 (its startup error: "122.69/139.8 GiB")
    activation_gib = 0.92 * total_gib - facts["model_load_gib"] - graph_gib - facts["kv_cache_gib"]
    # startup phases of the graphs config
    st = json.loads((root / "gpu-h200-vllm-startup" / "startup.json").read_text())
    phases = {(s["config_id"], s["kind"]): s["phases"] for s in st["starts"] if s["config_id"] == "graphs"}
    cold, warm = phases[("graphs", "cold")], phases[("graphs", "warm")]
    itl = {
        c: json.loads(
            (root / "gpu-h200-vllm-startup" / "steady" / "runs" / f"{c}__chat__r1" / "summary.json").read_text()
        )["latency_ms"]["itl_token"]["p50"]
        for c in ("graphs", "eager")
    }
    return {
        "sim_gpu_memory_gib": total_gib,
        "sim_hbm_tbps": round(1 / inv_bw / 1e12, 3),
        "sim_tflops": round(flops / 1e12, 1),
        "sim_step_overhead_ms": round(o * 1000, 3),
        "sim_eager_overhead_ms": round(o * 1000 + itl["eager"] - itl["graphs"], 2),
        "sim_seq_overhead_us": round(per_seq * 1e6, 2),
        "sim_request_overhead_ms": round((r - o) * 1000, 2),
        "sim_frontend_seq_us": round(frontend_seq_ms * 1000, 1),
        "sim_graph_gib": graph_gib,
        "sim_activation_gib": round(activation_gib, 3),
        "sim_load_s": round((cold["load"] + warm["load"]) / 2, 2),
        "sim_compile_s": round(cold["compile"], 2),
        "sim_compile_cached_s": round(warm["compile"], 2),
        "sim_profile_s": round(cold["kv_profile"], 2),
        "sim_profile_cached_s": round(warm["kv_profile"], 2),
        "sim_capture_s": round((cold["capture"] + warm["capture"]) / 2, 2),
        "sim_init_s": round((cold["rest"] + warm["rest"]) / 2, 2),
    }


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0]) if args else Path("results/examples")
    fitted = fit(root)
    print(json.dumps(fitted, indent=2))
    if "--check" in argv:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from harness.sim.profiles import PROFILES

        shipped = {k: v for k, v in PROFILES["h200-llama8b-vllm026"].items() if k in fitted}
        if shipped != fitted:
            print(f"the shipped profile differs: {shipped}", file=sys.stderr)
            return 1
        print("the shipped profile h200-llama8b-vllm026 matches the fit")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
