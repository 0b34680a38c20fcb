"""Build a random-weight Llama-style model (~0.8 B parameters, bf16) and a locally trained
tokenizer for GPU sweeps on a node with no model hub.

    python3 bench/gpu/build_model.py [OUT_DIR] [--size small|gpu]     (default /tmp/harness-gpu-model)

Reuses the tokenizer recipe of tools/build_tiny_model.py (byte-level BPE trained on the Python
standard library, ChatML template). Special tokens and partial-UTF-8 tokens are never predicted
(zeroed tied embeddings), so every streamed token carries text and no request stops at EOS:
output lengths are exact even on servers that take no `ignore_eos`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from build_tiny_model import build_tokenizer, silent_ids  # noqa: E402

SIZES = {
    # hidden, intermediate, layers, heads, kv heads, head_dim  -> parameters (vocab 8192, tied)
    "small": (1024, 2816, 12, 16, 4, 64),  # ~0.16 B
    "gpu": (2048, 5632, 16, 16, 4, 128),  # ~0.77 B
}


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv and not argv[0].startswith("--") else Path("/tmp/harness-gpu-model")
    size = argv[argv.index("--size") + 1] if "--size" in argv else "gpu"
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        print(f"model ready: {out}")
        return 0
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    vocab = json.loads((out / "tokenizer.json").read_text())["model"]["vocab"]
    hidden, inter, layers, heads, kv, head_dim = SIZES[size]
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim, max_position_embeddings=8192,
        tie_word_embeddings=True, torch_dtype="bfloat16", bos_token_id=0, eos_token_id=2, pad_token_id=4,
    )
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        model.get_input_embeddings().weight[sorted(silent_ids(out))] = 0
    model.save_pretrained(out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    print(f"model ready: {out} ({params / 1e9:.2f} B parameters, {time.monotonic() - t0:.1f} s on {device})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
