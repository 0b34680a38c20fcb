"""The load controller's fleet part: several endpoints behind one benchmark.

The endpoint of each request is chosen right before it is sent (harness.load.routing),
outstanding requests are counted per endpoint, each record is labelled with its endpoint (and
LoRA adapter, cold or warm on it), and the prompts' prefix blocks are attributed to endpoints
when the request is recorded (off the read path).

It needs nothing of the controller: the endpoints, the routing policy's name and the run's
tokenizer (for the prefix blocks) are all it reads, so it is built and tested on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.load.routing import FleetState, PrefixOverlap, RouteRequest, first_block, make_router
from harness.metrics.record import RequestRecord

if TYPE_CHECKING:
    from harness.load.controller import Item

Labels = tuple[tuple[str, str], ...]


class Fleet:
    """route/release per request, the record's fleet labels, and the fleet block of the result."""

    def __init__(self, endpoints: list[str], routing: str, tokenizer: Any) -> None:
        self.endpoints = endpoints
        self.routing = routing
        self.tokenizer = tokenizer
        self.state = FleetState(len(endpoints))
        self.router = make_router(routing)
        self.overlap = PrefixOverlap(len(endpoints)) if len(endpoints) > 1 else None
        self._routed: dict[str, Item] = {}  # request id -> item, until its record is interpreted
        self._adapters_seen: set[tuple[int, str]] = set()  # (endpoint, adapter) asked for since the start

    def route(self, item: Item) -> int:
        """Pick the endpoint of `item` (right before it is sent; open loop: before connecting)."""
        fleet = self.state
        if fleet.n > 1:
            p = item.planned
            req = RouteRequest(
                p.index if p.session is not None else None,
                p.adapter,
                first_block(p.prefix or p.text) if self.routing == "prefix-affinity" else "",
            )
            item.endpoint = self.router.pick(req, fleet)
        fleet.outstanding[item.endpoint] += 1
        fleet.sent[item.endpoint] += 1
        return item.endpoint

    def release(self, item: Item) -> None:
        """The request's transfer ended (or it will not be sent)."""
        self.state.outstanding[item.endpoint] -= 1

    def labels(self, item: Item) -> Labels:
        """The record's adapter and endpoint labels (at send time); a measured request's prefix
        blocks are attributed to its endpoint once it is recorded."""
        p = item.planned
        labels: Labels = ()
        if p.adapter is not None:
            # the first request to an adapter on an endpoint since it started (this process's view) pays its load
            key = (item.endpoint, p.adapter)
            cold = key not in self._adapters_seen
            self._adapters_seen.add(key)
            labels += (("adapter", p.adapter), ("adapter_load", "cold" if cold else "warm"))
        if self.state.n > 1:
            labels += (("endpoint", self.endpoints[item.endpoint].split("//", 1)[-1]),)
            if not p.warmup and self.overlap is not None:
                self._routed[item.request_id] = item
        return labels

    def recorded(self, rec: RequestRecord) -> None:
        """A request was recorded: its prompt's prefix blocks count for its endpoint."""
        routed = self._routed.pop(rec.request_id, None) if self._routed else None
        if routed is not None:
            self._count_overlap(routed)

    def _count_overlap(self, item: Item) -> None:
        p = item.planned
        text = f"{p.prefix} {p.text}" if p.prefix else p.text
        tok = getattr(self.tokenizer, "_tok", None)
        tokens = tok.encode(text, add_special_tokens=False).ids if tok is not None else text.split()
        assert self.overlap is not None  # only a fleet's measured requests are routed here
        self.overlap.add(item.endpoint, tokens, p.adapter)

    def result(self) -> dict[str, Any]:
        """The load result's `fleet` block ({} for one endpoint)."""
        if self.overlap is None:
            return {}
        return {
            "fleet": {
                "endpoints": self.endpoints,
                "routing": self.routing,
                "sent": self.state.sent,
                **self.overlap.summary(),
            }
        }
