"""Upper bounds on what one input may ask for, each raisable by an environment variable.

A scenario or sweep file is data, but `concurrency: 10000000`, a 10^8-cell grid or a YAML bomb
in `sampling.extra_body` turn it into a memory exhaustion that ends in a kill, not an error. The
bounds are far above any sensible benchmark (an engine serving 20,000 concurrent streams is
already unusual) and each error names the variable that raises it, so a real need is one
`HARNESS_MAX_...=N` away.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.errors import UserError


@dataclass(frozen=True)
class Limit:
    env: str  # the environment variable that raises it
    default: int
    what: str  # what is counted, for the message

    @property
    def value(self) -> int:
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            value = int(float(raw))
        except ValueError:
            raise UserError(f"{self.env}={raw!r}: must be a whole number") from None
        if value < 1:
            raise UserError(f"{self.env}={raw!r}: must be at least 1")
        return value

    def message(self, got: int | float) -> str:
        # a huge value is shown short (1e+30, not thirty digits of float rounding)
        shown = f"{got:,.0f}" if abs(got) < 1e15 else f"{got:.3g}"
        return f"{shown} {self.what} is above the limit of {self.value:,} (set {self.env}=N to raise it)"

    def check(self, got: int | float) -> str | None:
        """The error text when `got` exceeds the limit, else None."""
        return self.message(got) if got > self.value else None


def _processes_default() -> int:
    return max(16, 4 * (os.cpu_count() or 1))


CONCURRENCY = Limit("HARNESS_MAX_CONCURRENCY", 20_000, "concurrent users")
IN_FLIGHT = Limit("HARNESS_MAX_IN_FLIGHT", 20_000, "requests in flight")
TOKENS = Limit("HARNESS_MAX_TOKENS", 2_000_000, "tokens in one request")
PROCESSES = Limit("HARNESS_MAX_PROCESSES", _processes_default(), "load processes")
SWEEP_CELLS = Limit("HARNESS_MAX_SWEEP_CELLS", 10_000, "sweep cells")
YAML_NODES = Limit("HARNESS_MAX_YAML_NODES", 200_000, "YAML values (aliases expanded)")
#: shared-prefix words generated ahead (count x tokens): `count: 100000000` grew memory for a minute
PREFIX_TOKENS = Limit("HARNESS_MAX_PREFIX_TOKENS", 20_000_000, "shared-prefix tokens (count x tokens)")
#: one input file a scenario names (a dataset, a trace, quality prompts): 200 MB traces are real,
#: /dev/zero is not (it was read until MemoryError)
INPUT_BYTES = Limit("HARNESS_MAX_INPUT_BYTES", 1 << 30, "bytes in one input file")
#: one engine /metrics page: real pages are 0.1-1 MB; a valid 30 MB page (550k series) cost a 3-s
#: run 1.8 GB and 53 s, scraped and parsed at every mark (audit R12)
METRICS_PAGE = Limit("HARNESS_MAX_METRICS_BYTES", 8 << 20, "bytes in one /metrics page")
#: a week: `duration_s: 1e300` is finite and passes every `> 0` check, and then never ends
DURATION = Limit("HARNESS_MAX_DURATION_S", 7 * 86_400, "seconds")


def check_processes(n: int, flag: str) -> None:
    problem = PROCESSES.check(n)
    if problem:
        raise UserError(f"{flag} {n}: {problem}")
