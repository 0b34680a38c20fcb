"""Build the tiny random-weight Llama + byte-level BPE tokenizer that the real-vLLM tests serve.

    .cache/vllm-venv/bin/python tools/build_tiny_model.py [OUT_DIR]   (default .cache/tiny-llama)

Runs with the vLLM venv's python (it has torch and transformers). Offline: the tokenizer is
trained on the Python standard library's own .py files; the weights are random with a fixed
seed (REAL_ENGINE.md: random weights emit EOS at random, so send ignore_eos with max_tokens).
Idempotent: an OUT_DIR that already holds this recipe's build (.harness-model-version) is kept.
One change from a plain random init: special tokens and tokens that are not whole UTF-8
characters are never predicted (zeroed tied embeddings), so every streamed token carries text.
"""

from __future__ import annotations

import json
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECIAL = ["<|begin_of_text|>", "<|im_start|>", "<|im_end|>", "<unk>", "<pad>"]
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _corpus(limit_bytes: int = 20_000_000) -> Iterator[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    used = 0
    for path in sorted(stdlib.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        used += len(text)
        yield text
        if used > limit_bytes:
            return


def build_tokenizer(out: Path, vocab: int = 8192) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML
    fast.model_max_length = 4096
    fast.save_pretrained(out)


def build_model(out: Path, vocab_size: int, big: bool = False) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    size = (
        dict(
            hidden_size=1024,
            intermediate_size=2816,
            num_hidden_layers=12,
            num_attention_heads=16,
            num_key_value_heads=4,
            head_dim=64,
        )
        if big
        else dict(
            hidden_size=256,
            intermediate_size=768,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=64,
        )
    )
    config = LlamaConfig(
        vocab_size=vocab_size,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=4,
        **size,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    # Never predict special tokens nor tokens whose bytes are not valid UTF-8 on their own: their
    # output embedding rows (tied to the input ones) are zeroed, so their logit is 0 while the
    # max over thousands of random logits is positive. Otherwise a random model can stream 32
    # tokens that vLLM's detokenizer turns into no text at all (held-back partial characters).
    with torch.no_grad():
        model.get_input_embeddings().weight[sorted(silent_ids(out))] = 0
    model.save_pretrained(out, safe_serialization=True)
    gen = out / "generation_config.json"
    if gen.exists():
        data = json.loads(gen.read_text())
        data["eos_token_id"] = 2
        gen.write_text(json.dumps(data, indent=2))


def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level alphabet: printable stand-in character -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def silent_ids(out: Path) -> set[int]:
    """Token ids that would stream as no text: special tokens and partial UTF-8 sequences."""
    vocab = json.loads((out / "tokenizer.json").read_text())["model"]["vocab"]
    dec = _byte_decoder()
    silent = {vocab[t] for t in SPECIAL}
    for token, idx in vocab.items():
        if token in SPECIAL:
            continue
        try:
            bytes(dec[c] for c in token).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            silent.add(idx)
    return silent


MODEL_VERSION = "2"  # bump when the recipe changes: an older build is rebuilt


def is_built(out: Path) -> bool:
    version = out / ".harness-model-version"
    return (
        (out / "config.json").is_file()
        and (out / "tokenizer.json").is_file()
        and any(out.glob("*.safetensors"))
        and version.is_file()
        and version.read_text().strip() == MODEL_VERSION
    )


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / ".cache" / "tiny-llama"
    if is_built(out):
        print(f"tiny model ready: {out}")
        return 0
    start = time.monotonic()
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    build_tokenizer(tmp)
    vocab = json.loads((tmp / "tokenizer.json").read_text())["model"]["vocab"]
    ids = {t: vocab[t] for t in SPECIAL}
    assert ids == {"<|begin_of_text|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<unk>": 3, "<pad>": 4}, ids
    build_model(tmp, vocab_size=len(vocab))
    (tmp / ".harness-model-version").write_text(MODEL_VERSION + "\n")
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)
    print(f"tiny model ready: {out} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
