"""Fleets: one load spread over several endpoints (replicas) by a routing policy.

A policy picks the endpoint of each request right before it is sent (open loop: when its
connection is opened, up to 50 ms before), from what the client knows: requests outstanding per
endpoint, the session, the prompt's first block, the adapter and where it was sent before.
One class per policy, registered by name (`target.routing`):

  round-robin         endpoints in turn
  least-outstanding   the endpoint with the fewest requests in flight (ties: the lowest index)
  session-affinity    a session stays on one endpoint (new sessions: least outstanding)
  prefix-affinity     hash of the prompt's first block: requests sharing a prefix meet its cache
  adapter-affinity    an adapter's requests go where it was sent before (loaded there), unless
                      that endpoint holds SLACK more requests than the least loaded (then: the
                      least loaded, which then has the adapter too)

`PrefixOverlap` measures, from the prompts sent, the share of prefix blocks (the engine's block
size, the run's tokenizer) seen on more than one endpoint: the duplication a distributed prefix
cache would remove (guide 001, 4.2). It runs when a request is recorded, off the read path.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.registry import Registry

BLOCK = 16
#: adapter-affinity: how many more outstanding requests than the least loaded endpoint are tolerated
SLACK = 4


@dataclass(slots=True)
class RouteRequest:
    session: int | None
    adapter: str | None
    first_block: str  # the prompt's first block of text (prefix-affinity)


@dataclass
class FleetState:
    n: int
    outstanding: list[int] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.outstanding = [0] * self.n
        self.sent = [0] * self.n

    def least(self) -> int:
        o = self.outstanding
        return min(range(self.n), key=o.__getitem__)


class Router(Protocol):
    def pick(self, req: RouteRequest, fleet: FleetState) -> int: ...


ROUTERS: Registry[type] = Registry("routing policy")


@ROUTERS.register("round-robin")
class RoundRobin:
    def __init__(self) -> None:
        self.next = 0

    def pick(self, req: RouteRequest, fleet: FleetState) -> int:
        i = self.next % fleet.n
        self.next += 1
        return i


@ROUTERS.register("least-outstanding")
class LeastOutstanding:
    def pick(self, req: RouteRequest, fleet: FleetState) -> int:
        return fleet.least()


@ROUTERS.register("session-affinity")
class SessionAffinity:
    def __init__(self) -> None:
        self.home: dict[int, int] = {}

    def pick(self, req: RouteRequest, fleet: FleetState) -> int:
        if req.session is None:
            return fleet.least()
        i = self.home.get(req.session)
        if i is None:
            i = self.home[req.session] = fleet.least()
        return i


@ROUTERS.register("prefix-affinity")
class PrefixAffinity:
    def pick(self, req: RouteRequest, fleet: FleetState) -> int:
        return zlib.crc32(req.first_block.encode()) % fleet.n


@ROUTERS.register("adapter-affinity")
class AdapterAffinity:
    def __init__(self) -> None:
        self.homes: dict[str, list[int]] = {}

    def pick(self, req: RouteRequest, fleet: FleetState) -> int:
        if req.adapter is None:
            return fleet.least()
        homes = self.homes.setdefault(req.adapter, [])
        o = fleet.outstanding
        best = fleet.least()
        if homes:
            home = min(homes, key=o.__getitem__)
            if o[home] <= o[best] + SLACK:
                return home
        homes.append(best)
        return best


def make_router(name: str) -> Router:
    return ROUTERS.get(name)()


def first_block(text: str, block: int = BLOCK) -> str:
    """The prompt's first `block` words (tokens of the built-in tokenizer; close enough to key a hash)."""
    return " ".join(text[: block * 24].split()[:block])


class PrefixOverlap:
    """Which endpoints saw each prefix block (hash chain of whole blocks, as engines key them)."""

    def __init__(self, n: int, block: int = BLOCK) -> None:
        self.block = block
        self.seen: dict[int, int] = {}  # chained block hash -> bitmask of endpoints

    def add(self, endpoint: int, tokens: list[Any], salt: str | None = None) -> None:
        bit = 1 << endpoint
        seen, b = self.seen, self.block
        parent: int = hash(("adapter", salt)) if salt else 0
        for i in range(len(tokens) // b):
            parent = hash((parent, tuple(tokens[i * b : (i + 1) * b])))
            seen[parent] = seen.get(parent, 0) | bit

    def summary(self) -> dict[str, Any]:
        total = len(self.seen)
        shared = sum(1 for m in self.seen.values() if m & (m - 1))
        return {"prefix_blocks": total, "on_several_endpoints": shared, "overlap": (shared / total) if total else None}
