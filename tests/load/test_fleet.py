"""The controller's fleet part on its own: routing, per-endpoint counts, labels, the result block."""

from __future__ import annotations

from harness.load.controller import Item
from harness.load.fleet import Fleet
from harness.metrics.record import RequestRecord
from harness.workload.generator import PlannedRequest


class Words:
    """The built-in tokenizer's stand-in: no `_tok`, so prompts are counted in words."""

    id = "words"


def item(i: int, adapter: str | None = None, warmup: bool = False) -> Item:
    p = PlannedRequest(
        index=i,
        class_name="a",
        prefix="",
        text=f"hello world {i}",
        input_tokens=3,
        output_tokens=2,
        prefix_id=None,
        warmup=warmup,
        adapter=adapter,
    )
    return Item(p, b"{}", None, f"m{i}-1")


def test_one_endpoint_routes_everything_to_it_and_has_no_block() -> None:
    fleet = Fleet(["http://a:1"], "round-robin", Words())
    it = item(0)
    assert fleet.route(it) == 0
    assert fleet.state.outstanding == [1]
    fleet.release(it)
    assert fleet.state.outstanding == [0]
    assert fleet.labels(it) == ()
    assert fleet.result() == {}


def test_round_robin_labels_each_record_with_its_endpoint() -> None:
    fleet = Fleet(["http://a:1", "http://b:2"], "round-robin", Words())
    items = [item(i) for i in range(4)]
    picked = [fleet.route(it) for it in items]
    assert sorted(picked) == [0, 0, 1, 1]
    assert fleet.state.sent == [2, 2]
    labels = [fleet.labels(it) for it in items]
    assert {dict(lab)["endpoint"] for lab in labels} == {"a:1", "b:2"}
    for it in items:  # recorded: the prompt's prefix blocks count for its endpoint
        fleet.recorded(
            RequestRecord(
                index=it.planned.index,
                class_name="a",
                request_id=it.request_id,
                intended_ns=None,
                intended_input_tokens=3,
            )
        )
    block = fleet.result()["fleet"]
    assert block["endpoints"] == ["http://a:1", "http://b:2"]
    assert block["routing"] == "round-robin"
    assert block["sent"] == [2, 2]


def test_an_adapter_is_cold_once_per_endpoint() -> None:
    fleet = Fleet(["http://a:1"], "round-robin", Words())
    first, second = item(0, adapter="lora1"), item(1, adapter="lora1")
    fleet.route(first)
    fleet.route(second)
    assert dict(fleet.labels(first))["adapter_load"] == "cold"
    assert dict(fleet.labels(second))["adapter_load"] == "warm"
