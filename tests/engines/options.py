"""The command-line options an engine release accepts, read from recordings in tests/engines/data,
and a check that an argv passes them: every `--option` is one of them, and it takes a value exactly
when the release's parser does. This is how the flag maps are checked for engines that cannot run
here (SGLang and TGI need CUDA builds): a map that spells a flag the engine does not have, or
passes a value to a switch, fails before any GPU is involved.

Three recordings are tables (`option [alias ...] arity` per line: vLLM's and SGLang's argparse
parsers dumped, TGI's clap `struct Args`); llama.cpp's is `llama-server --help` as printed (the
same text the real build at HARNESS_LLAMACPP_DIR prints; tests/e2e/test_llamacpp.py starts it with
the map's flags), transformers' is `transformers serve --help` (typer); the simulator's is its
live parser.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

DATA = Path(__file__).parent / "data"

#: option -> whether it takes a value
Options = dict[str, bool]


def table(path: Path) -> Options:
    """`--opt [--alias ...] ARITY` lines (0: a switch; 1, +, *, ?: a value)."""
    out: Options = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        *names, arity = line.split()
        for name in names:
            out[name] = arity != "0"
    return out


def llama_help(path: Path) -> Options:
    """llama-server --help: each option line is `-x, --xx[, -no-x, --no-xx] [VALUE]` then the text
    (a VALUE may be a list of choices with commas: `--spec-type none,draft-simple,...`)."""
    out: Options = {}
    for line in path.read_text().splitlines():
        if not line.startswith("-"):
            continue
        # `-c,    --ctx-size N` pads after the short form's comma: close it up before finding the text
        head = re.split(r"\s{2,}", re.sub(r",\s+", ", ", line.strip()), maxsplit=1)[0]
        m = re.fullmatch(r"(--?[\w.-]+(?:, --?[\w.-]+)*)( \S.*)?", head)
        assert m, f"{path.name}: cannot read the option line {line!r}"
        for name in m.group(1).split(", "):
            out[name] = m.group(2) is not None
    return out


def typer_help(path: Path) -> Options:
    """`transformers serve --help` (typer): `  [-x, ]--opt [TYPE|[choices]]` or `  --x / --no-x` per option."""
    out: Options = {}
    for line in path.read_text().splitlines():
        m = re.match(r"  ((?:-\w, )?--[\w-]+(?: / --[\w-]+)?)(?: (\[[^\]]+\]|[A-Z]+))?(?:\s|$)", line)
        if m:
            out.update(dict.fromkeys(re.findall(r"-{1,2}[\w-]+", m.group(1)), m.group(2) is not None))
    return out


def transformers() -> Options:
    return typer_help(DATA / "transformers" / "transformers_5.19_serve_help.txt")


def parser(p: argparse.ArgumentParser) -> Options:
    """A live argparse parser's options (the simulator's own: it takes vLLM's names)."""
    out: Options = {}
    for a in p._actions:
        if a.option_strings and a.nargs != 0 and not isinstance(a, argparse._HelpAction):
            out.update(dict.fromkeys(a.option_strings, True))
        elif a.option_strings:
            out.update(dict.fromkeys(a.option_strings, False))
    return out


def sim() -> Options:
    from harness.sim.cli import build_parser

    return parser(build_parser())


def vllm() -> Options:
    return table(DATA / "vllm" / "vllm_0.32.0_serve_options.txt")


def sglang() -> Options:
    return table(DATA / "sglang" / "sglang_0.5.23_options.txt")


def tgi() -> Options:
    return table(DATA / "tgi" / "tgi_v3.3.7_launcher_options.txt")


def llamacpp() -> Options:
    return llama_help(DATA / "llamacpp" / "llama-server_0c1e570_help.txt")


#: kind -> (its release's options, where its default command's options begin: after `vllm serve
#: {model}`, `python -m sglang.launch_server`, the program)
RECORDED = {
    "vllm": (vllm, 3),
    "sglang": (sglang, 3),
    "tgi": (tgi, 1),
    "llamacpp": (llamacpp, 1),
    "sim": (sim, 3),
    "transformers": (transformers, 3),
}


def problems(argv: list[str], options: Options, start: int = 1) -> list[str]:
    """What the engine's parser would refuse in argv[start:] (placeholders count as values)."""
    out: list[str] = []
    i = start
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("-"):
            out.append(f"{tok!r}: a value with no option before it")
            i += 1
            continue
        name, eq, _ = tok.partition("=")
        if name not in options:
            out.append(f"{name}: not an option of this release")
            i += 1
            continue
        if options[name]:
            if not eq and (i + 1 >= len(argv) or (argv[i + 1].startswith("--") and not _number(argv[i + 1]))):
                out.append(f"{name}: needs a value")
            i += 1 if eq else 2
        else:
            if eq:
                out.append(f"{name}: a switch given a value")
            i += 1
    return out


def _number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


#: a value of each guide knob to try a map with (switches try both their settings, kv-dtype its try_values)
SAMPLES: dict[str, object] = {
    "max-model-len": 4096,
    "gpu-memory-utilization": 0.85,
    "max-num-seqs": 64,
    "max-num-batched-tokens": 512,
    "tensor-parallel-size": 2,
}

#: a speculative-decoding candidate in each kind's form (a tune file's `candidates`)
SPECULATIVE: dict[str, object] = {
    "vllm": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4},  # JSON
    "sim": {"method": "ngram", "num_speculative_tokens": 4},
    "sglang": {
        "speculative-algorithm": "EAGLE",
        "speculative-draft-model-path": "D",
        "speculative-num-steps": 3,
        "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 4,
    },
    "tgi": 2,
    "llamacpp": {"spec-type": "draft-simple", "model-draft": "D.gguf", "spec-draft-n-max": 4},
}


def argv_for(kind_name: str, changes: dict[str, object]) -> list[str]:
    """The kind's default command with guide knobs set through its map (what tune starts)."""
    from harness.engines import get_kind
    from harness.sweep.flags import apply_flags, substitute
    from harness.sweep.models import EngineSpec

    kind = get_kind(kind_name)
    argv = substitute(
        kind.default_command(EngineSpec(kind=kind_name)), {"model": "M", "host": "127.0.0.1", "port": 8000}
    )
    flags: dict[str, object] = {}
    for guide, value in changes.items():
        flags.update(kind.flags.knob(guide).change(value, flags))
    return apply_flags(argv, flags)


def every_setting(kind_name: str) -> list[tuple[str, object]]:
    """(guide knob, value) for every knob the kind has: both settings of a switch, a sample value otherwise."""
    from harness.engines import get_kind

    out: list[tuple[str, object]] = []
    for guide, k in get_kind(kind_name).flags.knobs.items():
        if k.flag is None:
            continue
        if k.is_switch:
            out += [(guide, k.on), (guide, k.off)]
        elif k.try_values:
            out += [(guide, v) for v in k.try_values]
        elif guide in SAMPLES:
            out.append((guide, SAMPLES[guide]))
        elif guide == "speculative-config" and kind_name in SPECULATIVE:
            out.append((guide, SPECULATIVE[kind_name]))
    return out


def refused_settings(kind_name: str) -> list[str]:
    """Every setting of every knob the kind's map has, as tune would start it, with what the
    kind's recorded release would refuse in it (empty: the release takes them all)."""
    read, start = RECORDED[kind_name]
    options = read()
    out = []
    for guide, value in every_setting(kind_name):
        argv = argv_for(kind_name, {guide: value})
        out += [f"{guide}={value!r}: {p}" for p in problems(argv, options, start)]
    return out
