"""Flags -> argv, the way `vllm bench sweep`'s `apply_to_cmd` does it, a little stricter.

A flag already on the command line is replaced in place (either spelling: `max-num-seqs` finds
`--max-num-seqs`, `--max_num_seqs`, `--max-num-seqs=8`, and for booleans `--no-max-num-seqs`);
otherwise it is appended. True -> `--x`, False -> `--no-x`, dict/list -> JSON, None -> removed.

A flag named `env:NAME` is the engine's environment variable NAME, not an argument: some engines
take a setting only that way (TGI's `PREFIX_CACHING`, ggml's `GGML_CUDA_DISABLE_GRAPHS`), and a
sweep or a tune varies it per config like any flag. `env_of` gives them (True -> "1", False ->
"0", None -> unset) for the engine start; `shell_line` shows the command with them in front.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.engines.parts.flags import ENV_PREFIX, flag_key, is_env


def _spelling(name: str) -> str:
    """The option as written on the command line: `--name` unless the user gave dashes."""
    return name if name.startswith("-") else f"--{name}"


def render_value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=False)
    return str(value)


def render_flag(name: str, value: Any) -> list[str]:
    """argv tokens for one flag (empty for None)."""
    if value is None:
        return []
    if isinstance(value, bool):
        if name.startswith("-"):
            # literal spelling: `-x: true` -> `-x`; false -> `--no-x`
            return [name] if value else [f"--no-{flag_key(name)}"]
        return [f"--{name}"] if value else [f"--no-{name}"]
    return [_spelling(name), render_value(value)]


def _is_option(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)  # a negative number is a value
        return False
    except ValueError:
        return True


def _match(token: str, key: str) -> bool:
    """Does argv token start option `key` (`--key`, `--key=v`, `--no-key`, underscore spellings)?"""
    if not token.startswith("-"):
        return False
    head = token.split("=", 1)[0]
    k = flag_key(head)
    return k == key or k == f"no-{key}"


def apply_flags(argv: list[str], flags: Mapping[str, Any]) -> list[str]:
    out = list(argv)
    for name, value in flags.items():
        if is_env(name):
            continue  # the engine's environment (env_of), not an argument
        key = flag_key(name)
        new = render_flag(name, value)
        spans: list[tuple[int, int]] = []  # [start, end) of each existing occurrence
        i = 0
        while i < len(out):
            tok = out[i]
            if _match(tok, key):
                end = i + 1
                # `--key value`; a switch (`--key`, `--no-key`) has no value token, but we
                # cannot tell a switch from a valued flag before a positional, so a value
                # follows only when the replaced flag is not a boolean switch itself
                followed = "=" not in tok and end < len(out) and not _is_option(out[end])
                switch = isinstance(value, bool)
                if followed and (
                    (not switch and not flag_key(tok).startswith(f"no-{key}"))
                    or (switch and out[end].lower() in ("true", "false"))
                ):
                    end += 1
                spans.append((i, end))
                i = end
            else:
                i += 1
        if not spans:
            out.extend(new)
            continue
        first, *rest = spans
        for start, end in reversed(rest):
            del out[start:end]
        out[first[0] : first[1]] = new
    return out


def env_of(flags: Mapping[str, Any]) -> dict[str, str | None]:
    """The environment variables a flag set sets (`env:NAME` keys): NAME -> value, None = unset."""
    out: dict[str, str | None] = {}
    for name, value in flags.items():
        if is_env(name):
            if isinstance(value, bool):
                value = "1" if value else "0"
            out[name[len(ENV_PREFIX) :]] = None if value is None else render_value(value)
    return out


def with_env(env: dict[str, str], flags: Mapping[str, Any]) -> dict[str, str]:
    """`env` with the flag set's environment variables set (or removed)."""
    for name, value in env_of(flags).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def shell_line(argv: list[str], flags: Mapping[str, Any]) -> str:
    """The command as a shell line, the flag set's environment variables in front (`NAME=v cmd ...`)."""
    import shlex

    sets = [f"{k}={v}" for k, v in env_of(flags).items() if v is not None]
    unsets = [k for k, v in env_of(flags).items() if v is None]
    head = ["env", *(f"-u{k}" for k in unsets)] if unsets else []
    return shlex.join([*head, *sets, *argv])


def substitute(argv: list[str], values: Mapping[str, Any]) -> list[str]:
    """Fill `{port}`-style placeholders (only the known names; other braces, e.g. JSON, stay)."""
    out = []
    for tok in argv:
        for name, val in values.items():
            if val is not None:
                tok = tok.replace("{" + name + "}", str(val))
        out.append(tok)
    return out


def describe(flags: Mapping[str, Any]) -> str:
    """`max-num-seqs=64,enable-prefix-caching=false` (for ids and tables)."""
    parts = []
    for name, value in flags.items():
        if isinstance(value, bool):
            v = "true" if value else "false"
        elif value is None:
            v = "unset"
        else:
            v = render_value(value)
        parts.append(f"{flag_key(name)}={v}")
    return ",".join(parts)
