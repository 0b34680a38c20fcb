"""Read a user's YAML file (scenario or sweep) strictly: every problem is one line with its place.

PyYAML's `safe_load` lets the last of two equal keys win (`concurrency: 2` ... `concurrency: 1000`
runs 1000 users without a word), decodes with a traceback on a byte that is not UTF-8, reports a
NUL byte in two lines without a line number, and expands aliases without bound (a "billion laughs"
inside `sampling.extra_body`, a place that takes any mapping, grows memory until the kill). Here:
a duplicate key is an error naming the key and both lines, bad bytes are named by line and
column, and the size of the document with its aliases expanded is bounded (limits.YAML_NODES).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.errors import UserError
from harness.limits import YAML_NODES
from harness.scenario.inputs import not_a_file, read_input


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys in a mapping (merge keys `<<:` still work)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *base`: keys written here override the merged ones, as YAML says
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            continue  # an unhashable key: construct_mapping reports it
        line = key_node.start_mark.line + 1
        if key in seen:
            raise _Duplicate(key, seen[key], line)
        seen[key] = line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


class _Duplicate(Exception):
    def __init__(self, key: Any, first: int, again: int) -> None:
        super().__init__(key)
        self.key, self.first, self.again = key, first, again


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _decode(raw: bytes, path: Path) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UserError(
            f"{path}: line {line} column {col}: byte 0x{raw[exc.start]:02x} is not UTF-8; save the file as UTF-8 text"
        ) from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise UserError(f"{path}: line {line}: a NUL byte (\\0); this is not a text file, or it is damaged")
    return text.removeprefix("\ufeff")


def expanded_size(data: Any) -> int:
    """How many values `data` holds with every alias expanded, without expanding them: shared
    sub-trees (what aliases produce) are counted once per reference, each measured once."""
    sizes: dict[int, int] = {}

    def size(obj: Any) -> int:
        if not isinstance(obj, (dict, list)):
            return 1
        key = id(obj)
        if key in sizes:
            return sizes[key]
        sizes[key] = 1  # a cycle (`&a [*a]`) counts once instead of recursing forever
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        total = 1 + sum(size(v) + (1 if isinstance(obj, dict) else 0) for _k, v in items)
        sizes[key] = total
        return total

    return size(data)


def load_yaml_file(path: Path, what: str = "YAML file") -> Any:
    """The parsed document, or a UserError naming the file and the line."""
    why = not_a_file(path)
    if why == "no such file":
        raise UserError(f"{path}: no such file; give the path of a {what}")
    if why is not None:
        raise UserError(f"{path}: {why}; give the path of a {what}")
    raw = read_input(path, str(path), f"give the path of a {what}")
    text = _decode(raw, path)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except _Duplicate as dup:
        raise UserError(
            f"{path}: line {dup.again}: duplicate key {str(dup.key)[:80]!r} (first on line {dup.first}); "
            "keep one of them"
        ) from None
    except yaml.reader.ReaderError as exc:  # a control character: the reader knows where, not the parser
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise UserError(
            f"{path}: line {line} column {col}: character #x{exc.character:04x} is not allowed in YAML "
            "(a control character); remove it, or write it as an escape in a double-quoted string"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f": line {mark.line + 1}" if mark else ""
        problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise UserError(f"{path}{where}: not valid YAML ({problem})") from None
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to read") from None
    except ValueError as exc:  # int() of a number over 4,300 digits, inside the YAML parser
        raise UserError(
            f"{path}: not valid YAML ({str(exc).split(':')[0]}; a number that long is no setting)"
        ) from None
    try:
        n = expanded_size(data)
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to read") from None
    too_many = YAML_NODES.check(n)
    if too_many:
        raise UserError(
            f"{path}: {too_many}; aliases (*name) repeat what they point to, so a few lines can "
            "stand for millions of values"
        )
    return data


def load_yaml_value(text: str, what: str) -> Any:
    """A value typed on the command line (`--set key=VALUE`) read as YAML with a file's bounds: a
    duplicate key or an alias bomb is one line naming `what` (audit R11: the bomb refused in a file
    in 2.6 s grew memory for 96 s through --set); text that is not YAML is kept as the string."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except _Duplicate as dup:
        raise UserError(f"{what}: duplicate key {str(dup.key)[:80]!r}; keep one of them") from None
    except (yaml.YAMLError, ValueError):
        return text
    except RecursionError:
        raise UserError(f"{what}: nested too deeply to read") from None
    try:
        problem = YAML_NODES.check(expanded_size(data))
    except RecursionError:
        raise UserError(f"{what}: nested too deeply to read") from None
    if problem:
        raise UserError(f"{what}: {problem}; aliases (*name) repeat what they point to")
    return data
