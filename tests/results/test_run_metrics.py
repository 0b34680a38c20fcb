"""The run-level metric table (harness/results/run_metrics.py): each figure read from one typed
summary, its source path valid in the model, and the sweep's metrics in index.json's order.

Adding a figure = one entry in the table + one case in EXPECTED below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel

from harness.results.models import RunSummary
from harness.results.models.sweep import CellMetrics
from harness.results.read import load_run
from harness.results.run_metrics import BY_NAME, LATENCY_COLUMNS, RUN_METRICS, sweep_metrics, used_in

GOLDEN = Path(__file__).resolve().parent / "golden"
GIB = 2**30

SUMMARY: dict[str, Any] = {
    "load": {"mode": "closed", "concurrency": 8},
    "requests": {"completed": 90, "failed": 10, "rps": 9.0},
    "tokens": {"input_total": 100, "output_total": 50, "input_per_s": 1000.0, "output_per_s": 500.0},
    "goodput": {"overall": {"good": 45, "total": 100, "fraction": 0.45, "rps": 4.5}},
    "cache": {"requests_reporting": 90, "prompt_tokens": 100, "cached_tokens": 25, "hit_rate": 0.25},
    "engine": {
        "kv_usage": {"mean": 0.5, "p50": 0.5, "p99": 0.9, "max": 0.95},
        "preemptions": {"count": 3, "per_s": 0.3},
        "prefix_cache": {"queries": 10, "hits": 4, "hit_rate": 0.4},
        "spec_decode": {"acceptance_rate": 0.6, "mean_acceptance_length": 2.8, "per_position": None},
        "gpu_memory": {"available": True, "used_max_bytes": 3 * GIB},
        "simulator": {"behind_s": 0.1, "modelled_s": 0.9, "behind_share": 0.1},
    },
    "diagnosis": {
        "engine_log": {
            "path": "x.log",
            "patterns": "vllm",
            "events": {"recompilation": {"count": 2, "first": "l", "means": "m"}},
        },
        "interference": {
            "long_prompt_tokens": 1024,
            "long_prefills": 3,
            "gaps": 100,
            "spike_factor": 3.0,
            "inside": {"count": 30, "p99_ms": 40.0},
            "outside": {"count": 70, "p99_ms": 20.0},
        },
        "memory": {"source": "nvml", "samples": 3, "growth_gib": 0.5},
    },
}

EXPECTED: dict[str, float | None] = {
    "req_per_s": 9.0,
    "output_tok_per_s": 500.0,
    "input_tok_per_s": 1000.0,
    "goodput_req_per_s": 4.5,
    "goodput_fraction": 0.45,
    "kv_usage_max": 0.95,
    "preemptions": 3.0,
    "prefix_hit_rate": 0.4,
    "completed": 90,
    "failed": 10,
    "client_concurrency": 8,
    "client_rate": None,
    "gpu_memory_used_max_gib": 3.0,
    "itl_p99_inside_prefill_ms": 40.0,
    "itl_p99_outside_prefill_ms": 20.0,
    "recompilations": 2,
    "memory_growth_gib": 0.5,
    "kv_usage_mean": 0.5,
    "spec_acceptance_rate": 0.6,
    "spec_mean_acceptance_length": 2.8,
    "gpu_memory_used_max_bytes": 3.0 * GIB,
    "cache_hit_rate": 0.25,
    "error_rate": 10.0,
    "sim_behind_share": 0.1,
}


def test_every_figure_has_a_case() -> None:
    assert set(EXPECTED) == set(BY_NAME) and len(BY_NAME) == len(RUN_METRICS)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_figure_of_one_summary(name: str) -> None:
    assert BY_NAME[name].get(RunSummary.model_validate(SUMMARY)) == pytest.approx(EXPECTED[name])


@pytest.mark.parametrize("name", list(EXPECTED))
def test_figure_of_an_empty_summary_is_none_or_zero(name: str) -> None:
    assert BY_NAME[name].get(RunSummary()) in (None, 0, 0.0)


def _models(annotation: Any) -> list[tuple[bool, type[BaseModel]]]:
    """The models a field holds: (is it a dict's value, model) for Model, Model | None, dict[str, Model]."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(False, annotation)]
    if get_origin(annotation) is dict:
        return [(True, m) for _, m in _models(get_args(annotation)[1])]
    return [found for arg in get_args(annotation) for found in _models(arg)]


def _field(model: type[BaseModel], path: list[str]) -> bool:
    field = model.model_fields.get(path[0])
    if field is None:
        return False
    rest = path[1:]
    if not rest:
        return True
    for keyed, inner in _models(field.annotation):
        if keyed and (len(rest) == 1 or _field(inner, rest[1:])):  # rest[0] is a key of the dict
            return True
        if not keyed and _field(inner, rest):
            return True
    return False


@pytest.mark.parametrize("metric", RUN_METRICS, ids=lambda m: m.name)
def test_source_is_a_path_in_the_model(metric) -> None:
    path = metric.source.split(" ")[0].split(".")
    assert _field(RunSummary, path), metric.source


def test_sweep_metrics_are_index_json_cell_metrics_in_order() -> None:
    fields = list(CellMetrics.model_fields)
    assert fields[: len(LATENCY_COLUMNS)] == list(LATENCY_COLUMNS)
    assert [f for f in fields if f in BY_NAME] == [m.name for m in used_in("sweep")]
    m = sweep_metrics(load_run(GOLDEN / "run-closed")).model_dump()
    only_set = {n for n, x in BY_NAME.items() if x.only_when_set}  # speculative runs' figures
    assert list(m) == [f for f in fields if f not in only_set] and m["req_per_s"] > 0 and m["ttft_p99_ms"] > 0


def test_sweep_metrics_of_recorded_runs_are_what_index_json_holds() -> None:
    """The sweep's recorded cells hold the metrics of their summary.json as written at the time."""
    for cell in json.loads((GOLDEN / "sweep" / "index.json").read_text())["cells"]:
        path = GOLDEN / "sweep" / cell["run_dir"] / "summary.json"
        if path.is_file():
            m = sweep_metrics(load_run(path)).model_dump(mode="json")
            # figures added since the recording are those written by speculative runs only
            assert set(m) - set(cell["metrics"]) <= {n for n, x in BY_NAME.items() if x.only_when_set}
            assert {k: m[k] for k in cell["metrics"]} == cell["metrics"]
