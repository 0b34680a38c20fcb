"""Which engine flag each tune step moves: a kind's spelling of each of the guides' knobs.

The steps speak the guides' language, which is vLLM's (`max-num-seqs`, `max-num-batched-tokens`,
`enable-prefix-caching`, ...): `GUIDE_KNOBS`. Other engines name the same knob differently, give
it another sense, or lack it; passing a vLLM flag to them makes the engine refuse to start
(argparse/clap `unrecognized argument`), which a tune would report as a failed step for the wrong
reason. So each kind's `flags` maps every guide knob to a `Knob`: this kind's flag and how a value
of the knob becomes this kind's flags, or `None` with the reason it has no equivalent (the step is
then skipped with that reason, and nothing is started for it). Kinds that take vLLM's names (vllm,
sim, custom) use vLLM's map, as a custom command built on vLLM expects.

What a knob may have to say about its engine (each kind's module cites the release it read):

- a name: SGLang's `max-num-seqs` is `--max-running-requests`;
- a switch's sense: `on` and `off` are the flag values that turn the feature on and off, None
  meaning "remove the flag" (vLLM's CUDA graphs are on without `--enforce-eager` and off with it;
  SGLang's prefix cache is on without `--disable-radix-cache`); `default_on` is the engine's
  default (None: the engine decides at start);
- an environment variable instead of a flag: `env:NAME` (TGI's prefix caching is the launcher's
  `PREFIX_CACHING` variable); a flag set carries it like a flag and the engine start puts it in
  the engine's environment (harness.sweep.flags);
- several flags for one knob: `also` names them; a scalar value is copied to all of them when
  `copies` (llama.cpp sets the K and V cache types apart), or sets the first while a mapping sets
  any of them (SGLang's speculative decoding is `--speculative-algorithm` plus the draft model
  and step counts);
- the values a step tries when the tune file lists none (`try_values`: the engine's spelling of
  an FP8 KV cache) and a valued flag's default (`default`, shown in reasons).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: the knobs the tune steps move, in the guides' (vLLM's) names; every kind's map names each
GUIDE_KNOBS = (
    "max-model-len",
    "gpu-memory-utilization",
    "max-num-seqs",
    "max-num-batched-tokens",
    "enable-chunked-prefill",
    "enable-prefix-caching",
    "cuda-graphs",
    "kv-cache-dtype",
    "tensor-parallel-size",
    "speculative-config",
)

#: a flag-set key that is the engine's environment variable NAME, not a command-line flag
ENV_PREFIX = "env:"


def flag_key(name: str) -> str:
    """Canonical key of a flag name: no leading dashes, underscores as dashes. An environment
    variable (`env:NAME`) keeps its name as written: the process sees it that way."""
    if name.startswith(ENV_PREFIX):
        return name
    return name.lstrip("-").replace("_", "-")


def is_env(name: str) -> bool:
    return name.startswith(ENV_PREFIX)


def _env_text(value: Any) -> str | None:
    """An environment variable's text for a flag value (True/False: 1/0; None: unset)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _value_in(flags: Mapping[str, Any], name: str) -> Any:
    key = flag_key(name)
    for k, v in flags.items():
        if flag_key(k) == key:
            return v
    return None


@dataclass(frozen=True)
class Knob:
    """One knob on one kind: its flag(s), and for a switch the values that turn the feature on/off."""

    flag: str | None
    why_missing: str = ""
    on: Any = None  # switches: the flag value that turns the feature on (None: remove the flag)
    off: Any = None  # switches: the flag value that turns it off
    default_on: bool | None = None  # switches: the engine's default (None: decided by the engine at start)
    default: Any = None  # valued flags: the engine's default, shown in reasons (None: the engine computes it)
    also: tuple[str, ...] = ()  # other flags this knob sets
    copies: bool = False  # a scalar value is written to every flag (K and V cache types)
    try_values: tuple[Any, ...] = ()  # what a step tries when the tune file lists no candidates

    @property
    def flags(self) -> tuple[str, ...]:
        """Every flag this knob may set, its own first."""
        return ((self.flag,) if self.flag else ()) + self.also

    @property
    def is_switch(self) -> bool:
        return self.on != self.off

    def change(self, value: Any, current: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The flags that set this knob to `value` (None: the knob's flags removed): {flag: value}
        for a plain flag; every flag for a copied one; for a group, the mapping's flags (a scalar
        is the first flag's value) with the group's other flags `current` holds removed (None)."""
        if self.flag is None:
            raise ValueError(f"no flag to set: {self.why_missing}")
        if not self.also:
            return {self.flag: value}
        if self.copies and not isinstance(value, Mapping):
            return dict.fromkeys(self.flags, value)
        if isinstance(value, Mapping):
            given = {flag_key(k): v for k, v in value.items()}
            unknown = sorted(set(given) - {flag_key(f) for f in self.flags})
            if unknown:
                raise ValueError(f"{', '.join(unknown)}: not one of {', '.join(self.flags)}")
            out = {f: given.get(flag_key(f)) for f in self.flags}
        else:
            out = {self.flag: value, **dict.fromkeys(self.also)}
        held = current or {}
        return {f: v for f, v in out.items() if v is not None or _value_in(held, f) is not None or f == self.flag}

    def value(self, flags: Mapping[str, Any]) -> Any:
        """This knob's value in a flag set (what `change` wrote): the flag's value, or for a group
        whose other flags are set, the mapping of those that are."""
        if self.flag is None:
            return None
        if not self.also:
            return _value_in(flags, self.flag)
        every = {f: _value_in(flags, f) for f in self.flags}
        held = {f: v for f, v in every.items() if v is not None}
        if self.copies and len({repr(v) for v in every.values()}) == 1:
            return every[self.flag]
        if not self.copies and set(held) <= {self.flag}:
            return held.get(self.flag)
        return held

    def is_on(self, value: Any) -> bool | None:
        """Switches: whether `value` (None: unset) turns the feature on; None when the engine decides."""
        if value is None:
            return True if self.on is None and self.off is not None else self.default_on
        if self.flag is not None and is_env(self.flag):  # the process sees text: 1, "1" and true are one setting
            value, on, off = _env_text(value), _env_text(self.on), _env_text(self.off)
            if on is None:  # on = unset: the variable's presence turns the feature off (ggml's getenv)
                return False
            return False if value == off else True if value == on else (self.default_on if off is None else True)
        if value == self.off and type(value) is type(self.off):
            return False
        if value == self.on and type(value) is type(self.on):
            return True
        return self.default_on if self.off is None else True

    def spelling(self) -> str:
        """How the plan shows this knob: `--max-running-requests`, `env PREFIX_CACHING`, ..."""
        names = [f"env {f[len(ENV_PREFIX) :]}" if is_env(f) else f"--{f}" for f in self.flags]
        return " + ".join(names)

    def switch_text(self) -> str:
        """A switch's two settings as the engine sees them: `on: without --x; off: --x`."""

        def one(value: Any) -> str:
            assert self.flag is not None
            if value is None:
                return f"without {self.spelling()}"
            if is_env(self.flag):
                return f"env {self.flag[len(ENV_PREFIX) :]}={value}"
            if isinstance(value, bool):
                return f"--{self.flag}" if value else f"--no-{self.flag}"
            return f"--{self.flag} {value}"

        default = {True: "on", False: "off", None: "decided by the engine"}[self.default_on]
        return f"on: {one(self.on)}; off: {one(self.off)} (default {default})"


@dataclass(frozen=True)
class FlagMap:
    kind: str
    knobs: dict[str, Knob] = field(default_factory=dict)

    def knob(self, guide_flag: str) -> Knob:
        """The kind's knob for a guide (vLLM) flag name; a flag outside the guides' passes as it is."""
        key = flag_key(guide_flag)
        return self.knobs.get(key, Knob(key))

    def knob_of(self, flag: str) -> Knob:
        """The knob whose own flag is `flag` (this kind's spelling); a plain knob for any other flag."""
        key = flag_key(flag)
        for k in self.knobs.values():
            if k.flag is not None and flag_key(k.flag) == key:
                return k
        return Knob(key)

    def lacks(self) -> dict[str, str]:
        """Guide knob -> why this kind has no such flag."""
        return {name: k.why_missing for name, k in self.knobs.items() if k.flag is None}

    def misspelt(self, name: str) -> str | None:
        """Why `name` (a flag of a tune file's base or candidates) is not this kind's: a guide
        (vLLM) name this kind spells otherwise, or a knob it lacks. None for this kind's flags and
        any flag the guides do not name (passed to the engine as written)."""
        key = flag_key(name)
        own = {flag_key(f) for k in self.knobs.values() for f in k.flags}
        if key in own or key not in self.knobs:
            return None
        k = self.knobs[key]
        if k.flag is None:
            return f"engine kind {self.kind} has no equivalent of --{key}: {k.why_missing}"
        sense = f" ({k.switch_text()})" if k.is_switch else ""
        return f"engine kind {self.kind} spells --{key} as {k.spelling()}{sense}; write {k.flag}"
