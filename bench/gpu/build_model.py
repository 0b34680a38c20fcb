"""Build a random-weight Llama-style model (bf16) and a locally trained tokenizer for GPU sweeps
on a node with no model hub.

    python3 bench/gpu/build_model.py [OUT_DIR] [--size small|gpu|llama8b] [--logit-scale X] [--echo]
                                                              (default /tmp/harness-gpu-model, gpu, 1)

Sizes: `small` 0.16 B, `gpu` 0.77 B, `llama8b` the shape of Llama-3-8B (8.03 B parameters,
16.1 GB in bf16: hidden 4096, 32 layers, 32 query / 8 KV heads of 128, MLP 14336, a 128,256-row
vocabulary with untied input and output embeddings, rope theta 500,000). Random weights give the
real kernels' timings (the GEMMs, attention and the 128k-wide logits of a production 8B model);
the trained tokenizer has 8,192 tokens, so the rows past it are padding that is never predicted.

Reuses the tokenizer recipe of tools/build_tiny_model.py (byte-level BPE trained on the Python
standard library, ChatML template). Special tokens and partial-UTF-8 tokens are never predicted
(zeroed tied embeddings), so every streamed token carries text and no request stops at EOS:
output lengths are exact even on servers that take no `ignore_eos`.

`--logit-scale X` multiplies the output embedding: at 1 the logits of a random model have a
standard deviation of about 1.3 over 8,192 live tokens, a next-token entropy of 8.2 nats (a flat
distribution whose top 20 tokens hold 5% of the mass, where any numeric change flips near-tied
greedy tokens); at 4 the entropy is about 2 nats and the top 20 hold about 94%, the shape of a
trained model's distribution, so a KL quality gate from top-20 log-probs measures a flag's numeric
drift on the scale it has for a real model. Timings do not change (same shapes, other values).

`--echo` builds a model whose greedy output repeats the prompt's last token forever: every
layer's output projections (attention o_proj, MLP down_proj) are zero, so the last hidden state is
the token's own embedding, and the output embedding is the input one (copied, untied), whose
largest dot product is with itself. The kernels are the same as the random model's, so its
timings are too; ngram speculation then drafts and is accepted at its upper bound (a loop of one
token is in the context after a few tokens), which random text never gives (it drafted 0 tokens
on an H100).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from build_tiny_model import build_tokenizer, silent_ids

SIZES = {
    # hidden, intermediate, layers, heads, kv heads, head_dim  -> parameters (vocab 8192, tied)
    "small": (1024, 2816, 12, 16, 4, 64),  # ~0.16 B
    "gpu": (2048, 5632, 16, 16, 4, 128),  # ~0.77 B
    "llama8b": (4096, 14336, 32, 32, 8, 128),  # 8.03 B with LLAMA3 below
}
#: the sizes that take Llama-3's vocabulary width, untied embeddings and rope theta
LLAMA3 = {"llama8b": {"vocab_size": 128256, "tie_word_embeddings": False, "rope_theta": 500000.0}}


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv and not argv[0].startswith("--") else Path("/tmp/harness-gpu-model")
    size = argv[argv.index("--size") + 1] if "--size" in argv else "gpu"
    logit_scale = float(argv[argv.index("--logit-scale") + 1]) if "--logit-scale" in argv else 1.0
    echo = "--echo" in argv
    done = out / ".harness-build-ok"  # written last: a build cut short (a 16 GB save) is not taken for a model
    if done.is_file():
        print(f"model ready: {out}")
        return 0
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    vocab = json.loads((out / "tokenizer.json").read_text())["model"]["vocab"]
    if size not in SIZES:
        print(f"--size {size}: choose one of {', '.join(SIZES)}", file=sys.stderr)
        return 2
    hidden, inter, layers, heads, kv, head_dim = SIZES[size]
    shape = {"vocab_size": len(vocab), "tie_word_embeddings": True, **LLAMA3.get(size, {})}
    extra = {"rope_theta": shape.pop("rope_theta")} if "rope_theta" in shape else {}
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        max_position_embeddings=8192,
        torch_dtype="bfloat16",
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=4,
        **shape,
        **extra,
    )
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_default_dtype(torch.bfloat16)  # an 8 B model initialised in float32 would take 32 GB first
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    # never predict special tokens, partial UTF-8 tokens, nor the padding rows past the tokenizer
    silent = sorted(silent_ids(out) | set(range(len(vocab), config.vocab_size)))
    with torch.no_grad():
        if echo:
            for layer in model.model.layers:
                layer.self_attn.o_proj.weight.zero_()
                layer.mlp.down_proj.weight.zero_()
            if not config.tie_word_embeddings:
                model.get_output_embeddings().weight.copy_(model.get_input_embeddings().weight)
        if logit_scale != 1.0:
            if config.tie_word_embeddings:
                print("--logit-scale needs untied embeddings (--size llama8b)", file=sys.stderr)
                return 2
            model.get_output_embeddings().weight.mul_(logit_scale)
        model.get_output_embeddings().weight[silent] = 0
        if not config.tie_word_embeddings:
            model.get_input_embeddings().weight[sorted(silent_ids(out))] = 0
    model.save_pretrained(out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    done.write_text(f"{size} {params} logit-scale {logit_scale:g}{' echo' if echo else ''}\n")
    print(
        f"model ready: {out} ({params / 1e9:.2f} B parameters, logit scale {logit_scale:g}{', echo' if echo else ''},"
        f" {time.monotonic() - t0:.1f} s on {device})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
