"""The machinery every results model shares: unknown keys refused, the file's key order kept.

Why not plain pydantic: the harness's files were written from dicts for a long time, and users'
scripts and the golden-file test (tests/results/test_golden.py) hold them to their bytes. A model
here must therefore write exactly the keys the writer gave it, in the writer's order:

- Declared order is the file's order. A `Block` writes its fields in the order they are declared,
  as a dict literal would; declare new fields where the writer adds them.
- `Omit` marks a field the writer leaves out of the file unless it sets it (a key that appears
  only in some runs: `groups`, a telemetry source's extra figures). Reading a file without it
  gives the default, and writing it back leaves it out again.
- A `Record` is a block whose writer sets keys in a varying order (an engine's startup facts in
  its log's fact-table order, GPU memory from NVML or from the simulator): it writes only the
  keys that were set, in the order they were set.

Every model refuses unknown keys (extra="forbid"): a figure renamed in one place fails loudly at
the writer instead of going missing for every reader. Assignment is validated, so
`summary.fleet = {...}` stores a typed block.

Numbers: `float` fields write floats (an int becomes 1.0); a field whose writer may store either
(a flag value, a log fact, a gauge echoed from the engine) is `Num`, which keeps the type it was
given. Non-finite floats are written as null, as the dict-based writer did.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

#: a number the writer may store as an int or a float; the file keeps which (smart union)
Num = int | float
#: a JSON scalar of a figure (a finding's value, a flag): bool before int so True stays true
Scalar = bool | int | float | str | None


class _OmitWhenUnset:
    """Annotated marker: the field is written only when the writer set it (see the module doc)."""

    def __repr__(self) -> str:
        return "Omit"


Omit = _OmitWhenUnset()


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


class Block(BaseModel):
    """A results block: fields in the file's order, unknown keys refused, `Omit` fields optional."""

    # defer_build: a model's validator is built when first used, not at import: a `harness run`
    # never validates a tune, sweep, capacity or startup document (import 0.53 -> 0.43 CPU-s)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)

    #: fields marked Omit, per class (filled when the class is built)
    _omit: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._omit = frozenset(
            name
            for name, field in cls.model_fields.items()
            if any(isinstance(m, _OmitWhenUnset) for m in field.metadata)
        )

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        drop = self._dropped()
        out = {k: v for k, v in data.items() if k not in drop}
        order = self._order_keys(out)
        if info.mode_is_json():
            return {k: _finite(out[k]) for k in order}
        return {k: out[k] for k in order}

    def _dropped(self) -> frozenset[str]:
        return self._omit - self.model_fields_set

    def _order_keys(self, data: dict[str, Any]) -> list[str]:
        return list(data)


class Record(Block):
    """A block whose keys are written only when set, in the order they were set (module doc)."""

    _set_order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _input_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        made = handler(data)
        if isinstance(data, dict) and isinstance(made, Record):
            made._set_order = [k for k in data if k in cls.model_fields]
        return made

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in type(self).model_fields and name not in self._set_order:
            self._set_order.append(name)

    def _dropped(self) -> frozenset[str]:
        return frozenset(type(self).model_fields) - self.model_fields_set

    def _order_keys(self, data: dict[str, Any]) -> list[str]:
        return [k for k in self._set_order if k in data] + [k for k in data if k not in self._set_order]
