"""summary.csv columns, metrics from a summary.json's blocks, the ranking, GPU-release wait."""

import csv
import io

from harness.results.models import RunSummary
from harness.results.models.sweep import Cell
from harness.sweep.launcher import GpuMemory
from harness.sweep.results import ranking, ranking_table, run_metrics, summary_csv


def entry(cfg, scen, rep, status="complete", goodput=1.0, reason=None, metrics=None, **facts):
    return Cell.model_validate(
        {
            "id": f"{cfg}__{scen}__r{rep}",
            "config_id": cfg,
            "flags": {"max-num-seqs": 8},
            "varied": {"max-num-seqs": 8} if cfg != "base" else {},
            "scenario": scen,
            "repeat": rep,
            "status": status,
            "run_dir": f"runs/{cfg}__{scen}__r{rep}",
            "startup_s": 12.5,
            "startup_facts": facts,
            "reason": reason,
            "metrics": ({"goodput_req_per_s": goodput, "req_per_s": goodput * 2, "preemptions": 3.0} | (metrics or {}))
            if status == "complete"
            else {},
        }
    )


def test_run_metrics_reads_the_summary_blocks():
    summary = {
        "latency_ms": {
            "ttft": {"p50": 10, "p99": 90, "count": 5},
            "itl_token": {"p50": 2, "p99": 9, "count": 50},
            "itl_chunk": {"p50": 4, "p99": 18, "count": 25},
            "e2e": {"p50": 300, "p99": 900},
        },
        "requests": {"rps": 3.5, "completed": 70, "failed": 1},
        "tokens": {"output_per_s": 800.0, "input_per_s": 1200.0},
        "goodput": {"overall": {"good": 60, "rps": 3.0, "fraction": 0.857}},
        "engine": {
            "kv_usage": {"max": 0.97},
            "preemptions": {"count": 12, "per_s": 0.5},
            "prefix_cache": {"hit_rate": 0.4},
        },
    }
    m = run_metrics(RunSummary.model_validate(summary)).model_dump()
    assert m["ttft_p99_ms"] == 90 and m["itl_p50_ms"] == 2 and m["itl_p99_ms"] == 9 and m["e2e_p50_ms"] == 300
    assert m["req_per_s"] == 3.5 and m["output_tok_per_s"] == 800 and m["goodput_req_per_s"] == 3.0
    assert m["kv_usage_max"] == 0.97 and m["preemptions"] == 12 and m["prefix_hit_rate"] == 0.4
    assert run_metrics(RunSummary()).ttft_p50_ms is None


def test_summary_csv_has_a_row_per_cell_with_facts():
    rows = list(
        csv.DictReader(
            io.StringIO(
                summary_csv(
                    [
                        entry("base", "mixed", 1, kv_cache_tokens=1000, max_concurrency=2.5, engine_version="0.33"),
                        entry("max-num-seqs=8", "mixed", 1, status="failed", reason="engine exited with code 1"),
                    ]
                )
            )
        )
    )
    assert [r["status"] for r in rows] == ["complete", "failed"]
    assert (
        rows[0]["kv_cache_tokens"] == "1000" and rows[0]["engine_version"] == "0.33" and rows[0]["startup_s"] == "12.5"
    )
    assert rows[1]["varied"] == "max-num-seqs=8" and rows[1]["reason"] == "engine exited with code 1"
    assert set(rows[0]) >= {
        "ttft_p50_ms",
        "ttft_p99_ms",
        "itl_p50_ms",
        "itl_p99_ms",
        "e2e_p50_ms",
        "e2e_p99_ms",
        "req_per_s",
        "output_tok_per_s",
        "goodput_req_per_s",
        "kv_usage_max",
        "preemptions",
        "prefix_hit_rate",
    }


def test_ranking_averages_repeats_and_puts_failures_last():
    entries = [
        entry("a", "s", 1, goodput=1.0),
        entry("a", "s", 2, goodput=3.0),
        entry("b", "s", 1, goodput=2.5),
        entry("b", "s", 2, status="failed", reason="boom"),
        entry("c", "s", 1, status="failed", reason="no start"),
        entry("a", "t", 1, goodput=9.0),
    ]
    r = ranking(entries)
    assert [row.config_id for row in r["s"]] == ["b", "a", "c"]
    assert r["s"][1].goodput == 2.0 and r["s"][0].status == "some failed"
    table = ranking_table(entries)
    assert table.splitlines()[0] == "scenario s: configs ranked by goodput (req/s meeting the SLOs)"
    assert "failed: no start" in table and "scenario t:" in table


def test_gpu_release_wait(monkeypatch):
    gpu = GpuMemory.__new__(GpuMemory)
    gpu._nvml, gpu.count = object(), 1
    readings = iter([[30 << 30], [20 << 30], [1 << 29]])
    monkeypatch.setattr(gpu, "used", lambda: next(readings))
    ok, used = gpu.wait_released([0], timeout=5)
    assert ok and used == [1 << 29]
    monkeypatch.setattr(gpu, "used", lambda: [30 << 30])
    assert gpu.wait_released([0], timeout=0.1) == (False, [30 << 30])


def _level_entry(config, value, frac, status="complete", repeat=1, levels=True):
    return Cell.model_validate(
        {
            "id": f"{config}__chat__concurrency={value}__r{repeat}",
            "config_id": config,
            "scenario": "chat",
            "load_level": f"concurrency={value}" if levels else None,
            "load": {"load.concurrency": value} if levels else None,
            "repeat": repeat,
            "status": status,
            "metrics": {"goodput_fraction": frac, "goodput_req_per_s": 1.0},
        }
    )


def test_capacity_is_the_highest_load_held_with_every_lower_one():
    from harness.results.sweep_index import Level
    from harness.sweep.results import capacity, ranking_table

    entries = [
        # listed out of order: levels are compared by value, not by position
        _level_entry("a", 64, 0.97),
        _level_entry("a", 1, 1.0),
        _level_entry("a", 8, 0.99),
        # b breaks at 8; its good 64 does not count (a lower level already failed)
        _level_entry("b", 1, 1.0),
        _level_entry("b", 8, 0.90),
        _level_entry("b", 64, 0.99),
        # c: two repeats at 1 average to 0.94: below 0.95 from the start
        _level_entry("c", 1, 0.98),
        _level_entry("c", 1, 0.90, repeat=2),
        _level_entry("c", 8, 1.0),
        # a failed cell is not evidence either way
        _level_entry("d", 1, 1.0),
        _level_entry("d", 8, None, status="failed"),
    ]
    cap = {r.config_id: r for r in capacity(entries)["chat"]}
    assert cap["a"].held and cap["a"].held.level == "concurrency=64" and cap["a"].broke is None
    assert cap["b"].held and cap["b"].held.level == "concurrency=1" and cap["b"].broke == Level("concurrency=8", 0.90)
    assert cap["c"].held is None and cap["c"].broke and cap["c"].broke.level == "concurrency=1"
    assert cap["d"].held and cap["d"].held.level == "concurrency=1" and cap["d"].broke is None
    assert {r.config_id: r.held and r.held.level for r in capacity(entries, attainment=0.999)["chat"]} == {
        "a": "concurrency=1",
        "b": "concurrency=1",
        "c": None,
        "d": "concurrency=1",
    }

    text = ranking_table(entries)
    assert "capacity under the SLOs: the highest load with >= 95% of requests within them" in text
    assert "b: concurrency=1 (at concurrency=8: 90% good)" in text and "c: none of the levels" in text
    # held at the highest level tried is a lower bound (audit D21: it read "concurrency=64")
    assert "a: >= concurrency=64 (the highest level tried; it may carry more)" in text
    assert "b: concurrency=1 (at" in text  # broke above: an exact answer, no bound
    assert "d: >= concurrency=1" in text  # its 8 failed: no evidence above 1


def test_no_capacity_without_levels_or_slos():
    from harness.sweep.results import capacity

    no_levels = [_level_entry("a", 1, 1.0, levels=False)]
    no_slo = [_level_entry("a", 1, None), _level_entry("a", 8, None)]
    assert capacity(no_levels) == {} and capacity(no_slo) == {}


def test_configs_at_different_client_loads_are_shown_with_their_load_and_not_ranked():
    """Audit D3: sim_max_num_seqs once linked the client's concurrency to the flag (8/32/128 users);
    the table crowned the 128-user config without showing that it carried 16x the load."""
    entries = []
    for seqs, good in ((8, 0.86), (32, 3.01), (128, 7.29)):
        entries.append(
            entry(
                f"max-num-seqs={seqs}", "s", 1, goodput=good, metrics={"client_concurrency": seqs, "client_rate": None}
            )
        )
    table = ranking_table(entries)
    first = table.splitlines()[0]
    assert "NOT ranked" in first and all(f"{n} users" in first for n in (8, 32, 128))
    rows = [ln for ln in table.splitlines() if "max-num-seqs=" in ln]
    assert all(ln.split()[0] == "-" for ln in rows), rows  # no rank numbers
    assert "128 users" in next(ln for ln in rows if "max-num-seqs=128" in ln)


def test_equal_loads_are_ranked_and_the_load_is_shown():
    entries = []
    for seqs, good in ((8, 0.86), (32, 3.01)):
        entries.append(entry(f"max-num-seqs={seqs}", "s", 1, goodput=good, metrics={"client_concurrency": 16}))
    table = ranking_table(entries)
    assert table.splitlines()[0] == "scenario s: configs ranked by goodput (req/s meeting the SLOs)"
    assert "16 users" in table and table.splitlines()[2].split()[0] == "1"


def test_gpu_memory_and_client_load_reach_summary_csv_and_the_table():
    """Audit D7: NVML's GPU memory was only in each cell's summary.json."""
    summary = {
        "load": {"mode": "closed", "concurrency": 32},
        "engine": {"gpu_memory": {"available": True, "used_max_bytes": 30 * 2**30, "total_bytes": 80 * 2**30}},
    }
    m = run_metrics(RunSummary.model_validate(summary)).model_dump(exclude_none=True)
    assert m["gpu_memory_used_max_gib"] == 30.0 and m["client_concurrency"] == 32
    e = entry("base", "s", 1, metrics=m)
    row = next(csv.DictReader(io.StringIO(summary_csv([e]))))
    assert row["gpu_memory_used_max_gib"] == "30" and row["client_concurrency"] == "32"
    table = ranking_table([e])
    assert "GPU GiB" in table and " 30.0" in table


def test_speculative_acceptance_is_shown_and_a_method_below_half_is_never_crowned():
    """Audit N9: a speculative sweep ranked ngram first with 39% acceptance and no acceptance
    column. Guide 000 lists acceptance rate and mean acceptance length among what to compare;
    guide 001: below 50% acceptance speculative decoding hurts."""
    summary = {
        "engine": {"spec_decode": {"acceptance_rate": 0.39, "mean_acceptance_length": 1.8, "per_position": None}}
    }
    m = run_metrics(RunSummary.model_validate(summary)).model_dump()
    assert m["spec_acceptance_rate"] == 0.39 and m["spec_mean_acceptance_length"] == 1.8
    assert "spec_acceptance_rate" not in run_metrics(RunSummary()).model_dump()  # written by speculative runs only
    low = entry(
        "ngram-k3", "chat", 1, goodput=9.0, metrics={"spec_acceptance_rate": 0.39, "spec_mean_acceptance_length": 1.8}
    )
    ok = entry(
        "eagle", "chat", 1, goodput=7.0, metrics={"spec_acceptance_rate": 0.72, "spec_mean_acceptance_length": 2.9}
    )
    base = entry("base", "chat", 1, goodput=6.0)
    rows = ranking([low, ok, base])["chat"]
    assert [r.config_id for r in rows] == ["eagle", "base", "ngram-k3"]  # the fastest is not crowned
    table = ranking_table([low, ok, base])
    assert "accept" in table and "acc.len" in table and " 39%" in table and "1.80" in table
    assert "ngram-k3: not ranked, speculative acceptance 39% is below 50%" in table and "guide 001" in table
    header = next(csv.reader(io.StringIO(summary_csv([low]))))
    assert "spec_acceptance_rate" in header and "spec_mean_acceptance_length" in header
