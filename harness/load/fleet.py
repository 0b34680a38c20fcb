"""The controller's fleet half (mixed into harness.load.controller.LoadController).

Several endpoints behind one benchmark: the endpoint of each request is chosen right before it is
sent (harness.load.routing), outstanding requests are counted per endpoint, each record is
labelled with its endpoint (and LoRA adapter, cold or warm on it), and the prompts' prefix
blocks are attributed to endpoints when the request is recorded (off the read path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.load.routing import FleetState, PrefixOverlap, RouteRequest, first_block, make_router
from harness.metrics.record import RequestRecord

if TYPE_CHECKING:
    from harness.load.controller import Item


class FleetTurns:
    """route/release/overlap; `self` is the LoadController."""

    scenario: Any
    tokenizer: Any

    def _init_fleet(self, endpoints: list[str]) -> None:
        self.endpoints = endpoints
        self.fleet = FleetState(len(endpoints))
        self.router = make_router(self.scenario.target.routing)
        self.overlap = PrefixOverlap(len(endpoints)) if len(endpoints) > 1 else None
        self._routed: dict[str, Item] = {}  # request id -> item, until its record is interpreted
        self._adapters_seen: set[tuple[int, str]] = set()  # (endpoint, adapter) asked for since the start

    def route(self, item: Item) -> int:
        """Pick the endpoint of `item` (right before it is sent; open loop: before connecting)."""
        fleet = self.fleet
        if fleet.n > 1:
            p = item.planned
            req = RouteRequest(p.index if p.session is not None else None, p.adapter,
                               first_block(p.prefix or p.text) if self.scenario.target.routing == "prefix-affinity" else "")
            item.endpoint = self.router.pick(req, fleet)
        fleet.outstanding[item.endpoint] += 1
        fleet.sent[item.endpoint] += 1
        return item.endpoint

    def release(self, item: Item) -> None:
        """The request's transfer ended (or it will not be sent)."""
        self.fleet.outstanding[item.endpoint] -= 1

    def _count_overlap(self, item: Item) -> None:
        """Prefix blocks of a measured request's prompt, per endpoint (at record time, off the read path)."""
        p = item.planned
        text = f"{p.prefix} {p.text}" if p.prefix else p.text
        tok = getattr(self.tokenizer, "_tok", None)
        tokens = tok.encode(text, add_special_tokens=False).ids if tok is not None else text.split()
        self.overlap.add(item.endpoint, tokens, p.adapter)  # type: ignore[union-attr]

    def _fleet_labels(self, item: Item) -> tuple[tuple[str, str], ...]:
        """The record's adapter and endpoint labels (at send time); a measured request's prefix
        blocks are attributed to its endpoint once it is recorded."""
        p = item.planned
        labels: tuple[tuple[str, str], ...] = ()
        if p.adapter is not None:
            # the first request to an adapter on an endpoint since it started (this process's view) pays its load
            key = (item.endpoint, p.adapter)
            cold = key not in self._adapters_seen
            self._adapters_seen.add(key)
            labels += (("adapter", p.adapter), ("adapter_load", "cold" if cold else "warm"))
        if self.fleet.n > 1:
            labels += (("endpoint", self.endpoints[item.endpoint].split("//", 1)[-1]),)
            if not p.warmup and self.overlap is not None:
                self._routed[item.request_id] = item
        return labels

    def _fleet_recorded(self, rec: RequestRecord) -> None:
        routed = self._routed.pop(rec.request_id, None) if self._routed else None
        if routed is not None:
            self._count_overlap(routed)

    def _fleet_result(self) -> dict[str, Any]:
        if self.overlap is None:
            return {}
        return {"fleet": {"endpoints": self.endpoints, "routing": self.scenario.target.routing,
                          "sent": self.fleet.sent, **self.overlap.summary()}}
