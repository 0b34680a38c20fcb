"""Write a small synthetic trace of hashed prefix blocks, in Mooncake's format, from a seed.

    python tools/make_block_trace.py [OUT] [--records 240] [--seed 28] [--rate 4] [--block-tokens 512]

One JSON object per line, in timestamp order: `timestamp` (ms since the first request),
`input_length`, `output_length`, `hash_ids` (one id per `--block-tokens` block of the prompt; equal
ids = equal prefixes, new ids numbered on from the last one used, as Mooncake's and AIPerf's
tools number them) and, for multi-turn conversations, `session_id` (AIPerf's extension). The mix
is what production traces show: requests on a few shared documents or system prompts (a shared
prefix of several blocks, then blocks of their own), multi-turn conversations whose turn k+1
repeats turn k's blocks and adds the reply and a new message, and one-off requests that share
nothing. Arrivals are Poisson at `--rate` with bursts. The same arguments always write the same
file (scenarios/traces/mooncake_synthetic.jsonl is `python tools/make_block_trace.py`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "scenarios" / "traces" / "mooncake_synthetic.jsonl"


def build(records: int, seed: int, rate: float, block_tokens: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    next_id = 0

    def new_ids(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    docs = [new_ids(int(rng.integers(2, 5))) for _ in range(6)]  # shared documents / system prompts: 2-4 blocks
    out: list[dict] = []
    t = 0.0
    conv = 0
    while len(out) < records:
        t += float(rng.exponential(1000.0 / rate)) * (0.15 if rng.random() < 0.2 else 1.0)  # some bursts
        kind = rng.random()
        if kind < 0.45:  # on a shared document: its blocks, then 0-2 blocks of the request's own
            doc = docs[min(int(rng.zipf(1.6)) - 1, len(docs) - 1)]
            own = int(rng.integers(0, 3))
            tail = int(rng.integers(16, block_tokens))  # the last block is partial
            ids = doc + new_ids(own + 1)
            n_in = (len(ids) - 1) * block_tokens + tail
            out.append(
                {
                    "timestamp": round(t),
                    "input_length": n_in,
                    "output_length": int(rng.integers(32, 256)),
                    "hash_ids": ids,
                }
            )
        elif kind < 0.75:  # a conversation: 3-5 turns, each repeating the history, 2-8 s apart
            sid = f"conv-{conv}"
            conv += 1
            ids = (docs[0][:2] if rng.random() < 0.5 else []) + new_ids(1)
            at = t
            for _turn in range(int(rng.integers(3, 6))):
                if len(out) >= records:
                    break
                tail = int(rng.integers(16, block_tokens))
                n_in = (len(ids) - 1) * block_tokens + tail
                out.append(
                    {
                        "timestamp": round(at),
                        "input_length": n_in,
                        "output_length": int(rng.integers(64, 200)),
                        "hash_ids": list(ids),
                        "session_id": sid,
                    }
                )
                at += float(rng.uniform(2000, 8000))
                ids = ids + new_ids(1)  # the reply and the next message fill the partial block and a new one
        else:  # a one-off: 1-4 blocks nobody else sends
            n = int(rng.integers(1, 5))
            out.append(
                {
                    "timestamp": round(t),
                    "input_length": (n - 1) * block_tokens + int(rng.integers(16, block_tokens)),
                    "output_length": int(rng.integers(32, 256)),
                    "hash_ids": new_ids(n),
                }
            )
    out.sort(key=lambda r: r["timestamp"])
    t0 = out[0]["timestamp"]
    for r in out:
        r["timestamp"] -= t0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=str(DEFAULT_OUT))
    ap.add_argument("--records", type=int, default=240)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--rate", type=float, default=4.0, help="mean arrivals per second (before bursts)")
    ap.add_argument("--block-tokens", type=int, default=512)
    a = ap.parse_args(argv)
    rows = build(a.records, a.seed, a.rate, a.block_tokens)
    Path(a.out).write_text("".join(json.dumps(r, separators=(", ", ": ")) + "\n" for r in rows))
    print(f"wrote {len(rows)} records to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
