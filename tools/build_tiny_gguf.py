"""Write the tiny Llama (tools/build_tiny_model.py) as a GGUF file for llama.cpp's llama-server.

    .cache/vllm-venv/bin/python tools/build_tiny_gguf.py MODEL_DIR OUT.gguf [--gguf-py DIR]

Why not llama.cpp's convert_hf_to_gguf.py: it identifies a BPE tokenizer's pre-tokenizer by the
hash of a fixed test string's token ids and refuses an unknown one ("BPE pre-tokenizer was not
recognized"), and our locally trained tokenizer is unknown. This script writes the same tensors
with the `gguf` package's writer instead: llama architecture, the tokenizer's byte-level vocab and
merges, and pre-tokenizer `gpt-2` (the regex of the `tokenizers` ByteLevel pre-tokenizer the
tokenizer was trained with, so llama.cpp's /tokenize counts match the harness's own counts).
No BOS is added (the Hugging Face tokenizer adds none either), so prompt lengths agree.

Runs with the vLLM venv's python (numpy, safetensors, torch). `gguf` comes from an installed
package or, with --gguf-py, from the llama.cpp tree's own gguf-py (the same version as the server
built by tools/setup_llamacpp.sh). Idempotent: an OUT whose stamp matches MODEL_DIR is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where a model is built (the venv with the converters)
    import numpy as np

GGUF_VERSION = "1"  # bump when the recipe changes


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Hugging Face's rotary layout -> GGML's (what convert_hf_to_gguf.py does to q/k)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _tensors(model_dir: Path) -> dict[str, np.ndarray]:
    import torch
    from safetensors.torch import load_file

    out: dict = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        for name, t in load_file(str(f)).items():
            out[name] = t.to(torch.float32).numpy()
    return out


def build(model_dir: Path, out: Path) -> None:
    import gguf
    import numpy as np

    cfg = json.loads((model_dir / "config.json").read_text())
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    tok_cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head

    tmp = out.with_name(out.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name("tiny-llama")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    # tokenizer: byte-level BPE ("gpt2" model in GGUF terms), ids in vocab order
    vocab: dict[str, int] = tok["model"]["vocab"]
    added = {a["content"]: a for a in tok.get("added_tokens", [])}
    tokens = [""] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    types = [
        gguf.TokenType.CONTROL if (t in added and added[t].get("special")) else gguf.TokenType.NORMAL for t in tokens
    ]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    for key, adder in (
        ("bos_token", w.add_bos_token_id),
        ("eos_token", w.add_eos_token_id),
        ("unk_token", w.add_unk_token_id),
        ("pad_token", w.add_pad_token_id),
    ):
        value = tok_cfg.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if value in vocab:
            adder(vocab[value])
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    if tok_cfg.get("chat_template"):
        w.add_chat_template(tok_cfg["chat_template"])
    elif (model_dir / "chat_template.jinja").is_file():
        w.add_chat_template((model_dir / "chat_template.jinja").read_text())

    # tensors: HF names -> GGUF names (tied output: llama.cpp reuses token_embd)
    tensors = _tensors(model_dir)

    def f32(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=np.float32)

    w.add_tensor("token_embd.weight", f32(tensors["model.embed_tokens.weight"]))
    w.add_tensor("output_norm.weight", f32(tensors["model.norm.weight"]))
    if "lm_head.weight" in tensors and not cfg.get("tie_word_embeddings", False):
        w.add_tensor("output.weight", f32(tensors["lm_head.weight"]))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", f32(tensors[p + "input_layernorm.weight"]))
        w.add_tensor(b + "attn_q.weight", f32(_permute(tensors[p + "self_attn.q_proj.weight"], n_head)))
        w.add_tensor(b + "attn_k.weight", f32(_permute(tensors[p + "self_attn.k_proj.weight"], n_kv)))
        w.add_tensor(b + "attn_v.weight", f32(tensors[p + "self_attn.v_proj.weight"]))
        w.add_tensor(b + "attn_output.weight", f32(tensors[p + "self_attn.o_proj.weight"]))
        w.add_tensor(b + "ffn_norm.weight", f32(tensors[p + "post_attention_layernorm.weight"]))
        w.add_tensor(b + "ffn_gate.weight", f32(tensors[p + "mlp.gate_proj.weight"]))
        w.add_tensor(b + "ffn_up.weight", f32(tensors[p + "mlp.up_proj.weight"]))
        w.add_tensor(b + "ffn_down.weight", f32(tensors[p + "mlp.down_proj.weight"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)


def _stamp(model_dir: Path) -> str:
    version = model_dir / ".harness-model-version"
    model_version = version.read_text().strip() if version.is_file() else "?"
    return f"{GGUF_VERSION} {model_dir.resolve()} {model_version}\n"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--gguf-py", type=Path, help="llama.cpp's gguf-py folder, when `gguf` is not installed")
    args = ap.parse_args(argv)
    stamp = args.out.with_name(args.out.name + ".stamp")
    if args.out.is_file() and stamp.is_file() and stamp.read_text() == _stamp(args.model_dir):
        print(f"tiny gguf ready: {args.out}")
        return 0
    if args.gguf_py:
        sys.path.insert(0, str(args.gguf_py))
    start = time.monotonic()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    build(args.model_dir, args.out)
    stamp.write_text(_stamp(args.model_dir))
    print(f"tiny gguf ready: {args.out} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
