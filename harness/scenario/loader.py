"""Load a scenario file, apply CLI overrides, and turn validation errors into one line each.

`scenarios/x.yaml: workload.classes[1].input_tokens.mean: must be > 0` is the format: file,
field path, what is wrong and the fix; the CLI exits 2 with these lines and no traceback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from harness.errors import UserError
from harness.scenario.models import Scenario
from harness.scenario.secrets import masked_scenario
from harness.scenario.yaml_io import load_yaml_file

M = TypeVar("M", bound=BaseModel)

_MESSAGES = {
    "extra_forbidden": "unknown key; remove it or check its spelling",
    "missing": "required; add it",
}


#: the tags pydantic puts in an error's path for the member of a union it tried (`x[1].str`, `.int`)
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "none", "bytes"})


def _union_tag(part: Any) -> bool:
    return isinstance(part, str) and (part in _UNION_TAGS or ("[" in part and part.endswith("]")))


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("fixed", "uniform", "normal", "lognormal"):
            continue  # discriminator tag pydantic inserts; not a key the user wrote
        elif isinstance(part, str) and part.startswith("function-"):
            continue
        elif _union_tag(part):
            continue  # a union member's name (`str`, `dict[str,any]`): one line per value, not per member
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


_DISTS = "fixed, uniform, normal, lognormal"


def _message(err: ErrorDetails) -> str:
    kind = err.get("type", "")
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    last = next((p for p in reversed(err.get("loc", ())) if isinstance(p, str)), "")
    if kind in ("model_attributes_type", "model_type", "dict_type"):
        if last in ("input_tokens", "output_tokens"):
            return f"must be a token count (e.g. 512) or a mapping with dist: one of {_DISTS}"
        return "must be a mapping (key: value)"
    if kind == "union_tag_not_found":
        return f"add dist: one of {_DISTS}"
    if kind == "too_short":
        return "must not be empty"
    if kind == "string_pattern_mismatch":
        if last == "api_key_env":
            return "must be the NAME of an environment variable holding the key (e.g. OPENAI_API_KEY), never the key"
        return "use only letters, digits, '_', '.' and '-'"
    msg = str(err.get("msg", "invalid"))
    msg = msg.removeprefix("Value error, ")
    msg = msg.replace("Input should be", "must be")
    if kind == "union_tag_invalid":
        ctx = err.get("ctx", {})
        return f"dist must be one of {ctx.get('expected_tags', 'fixed, uniform, normal, lognormal')}"
    return msg


def format_validation_error(source: str, exc: ValidationError) -> list[str]:
    """One line per value at fault: the errors pydantic gives for each member of a union (a flag
    value may be a string, a number, true/false, a mapping or a list) are one line."""
    by_path: dict[str, list[ErrorDetails]] = {}
    for e in exc.errors():
        by_path.setdefault(_path(tuple(e["loc"])), []).append(e)
    lines = []
    for path, errs in by_path.items():
        if len(errs) == 1:
            lines.append(f"{source}: {path}: {_message(errs[0])}")
        elif any(e.get("type") == "finite_number" for e in errs):
            lines.append(f"{source}: {path}: must be a finite number (not .inf or .nan)")
        else:
            kinds = list(
                dict.fromkeys(
                    _message(e).removeprefix("must be ").removeprefix("a valid ").removeprefix("a ") for e in errs
                )
            )
            lines.append(
                f"{source}: {path}: must be "
                + (", ".join(kinds[:-1]) + " or " + kinds[-1] if len(kinds) > 1 else kinds[0])
            )
    return lines


def read_yaml(path: Path) -> dict[str, Any]:
    """A user's YAML file as a mapping: duplicate keys, bad bytes and alias bombs are errors (yaml_io)."""
    data = load_yaml_file(path, "scenario YAML file")
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a YAML mapping (key: value) at the top level")
    return data


def validate(model: type[M], data: dict[str, Any], source: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(*format_validation_error(source, exc)) from None


#: how a list entry is named in an override path (the message of a path that cannot be followed)
LIST_SYNTAX = "a list entry is KEY.N.FIELD or KEY[N].FIELD, N from 0 (e.g. workload.classes.0.input_tokens)"
_INDEX = re.compile(r"\[(\d+)\]")


def override_keys(dotted: str) -> list[str]:
    """`workload.classes[0].input_tokens` and `workload.classes.0.input_tokens` -> the same keys."""
    return _INDEX.sub(r".\1", dotted).split(".")


class _Unset:
    """The value of an override that removes its key (the field's default applies)."""

    def __repr__(self) -> str:
        return "UNSET"


#: An override with this value removes the key from the scenario, so the field takes its default:
#: a `null` the user wrote (a sweep file's `overrides: {workload.tokenizer: null}`, `--set
#: workload.tokenizer=null`). A plain None is an override not given (a CLI flag left out) and
#: changes nothing; a written null was read the same way and silently dropped (the run kept the
#: file's tokenizer).
UNSET: Final = _Unset()


def written_nulls_unset(overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides a user wrote (a file's `overrides:`, `--set`): each null becomes UNSET."""
    return {k: UNSET if v is None else v for k, v in overrides.items()}


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set one override (UNSET: remove it). A path through a list takes an index; a path that
    cannot be followed is an error naming where it stops (it was silently dropped: `--set
    workload.classes.0...` ran the file unchanged, exit 0, audit N3)."""
    keys = override_keys(dotted)
    if any(not k for k in keys):
        raise UserError(f"override {dotted}: an empty key in the path; {LIST_SYNTAX}")
    node: Any = data
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        where = ".".join(keys[:i]) or "(top level)"
        if isinstance(node, dict):
            if last and value is UNSET:
                node.pop(key, None)
            elif last:
                node[key] = value
            elif node.get(key) is None:
                if value is UNSET:
                    return  # nothing there to unset
                node[key] = node = {}  # absent or `key:` left empty in the file
            else:
                node = node[key]
        elif isinstance(node, list):
            if not key.isdigit():
                raise UserError(f"override {dotted}: {where} is a list, so {key!r} must be an index; {LIST_SYNTAX}")
            index = int(key)
            if index >= len(node):
                raise UserError(
                    f"override {dotted}: {where} has {len(node)} entr{'y' if len(node) == 1 else 'ies'} "
                    f"(indexes 0-{len(node) - 1})"
                    if node
                    else f"override {dotted}: {where} is empty"
                )
            if last and value is UNSET:
                raise UserError(f"override {dotted}: null cannot remove a list entry; give {where} without it")
            if last:
                node[index] = value
            else:
                node = node[index]
        else:
            raise UserError(
                f"override {dotted}: {where} is a single value ({str(node)[:40]!r}), not a mapping or a "
                f"list; set {where} itself"
            )


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides are dotted paths (`load.concurrency`). Setting one load mode clears the other.
    A None value is an override not given; UNSET removes the key (written_nulls_unset)."""
    out: dict[str, Any] = yaml.safe_load(yaml.safe_dump(data))  # deep copy of plain data
    given = {k for k, v in overrides.items() if v is not None and v is not UNSET}
    unset = {k for k, v in overrides.items() if v is UNSET}
    load = out.get("load")
    if not isinstance(load, dict):
        load = {}
    if given & {"load.concurrency", "load.rate", "load.offline"}:
        load.pop("concurrency", None)  # one load mode replaces the other
        load.pop("rate", None)
        load.pop("offline", None)
    if given & {"load.duration_s", "load.requests"}:
        load.pop("duration_s", None)  # an explicit CLI stop condition replaces the file's
        load.pop("requests", None)
    if "warmup.duration_s" in given and isinstance(out.get("warmup"), dict):
        out["warmup"].pop("requests", None)  # `--warmup S` is the whole warmup, not an addition
    for dotted in sorted(given | unset):
        set_path(out, dotted, overrides[dotted])
    return out


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    path = Path(path)
    data = read_yaml(path)
    if overrides:
        data = apply_overrides(data, overrides)
    return validate(Scenario, data, str(path))


def dump_scenario(scenario: Scenario) -> str:
    """The scenario as a file (a run directory's scenario.yaml): credential headers masked."""
    return yaml.safe_dump(masked_scenario(scenario.model_dump(mode="json")), sort_keys=False)
