"""summary.csv columns, metrics from a summary.json's blocks, the ranking, GPU-release wait."""

import csv
import io

from harness.sweep.launcher import GpuMemory
from harness.sweep.results import ranking, ranking_table, run_metrics, summary_csv


def entry(cfg, scen, rep, status="complete", goodput=1.0, reason=None, **facts):
    return {
        "id": f"{cfg}__{scen}__r{rep}", "config_id": cfg, "flags": {"max-num-seqs": 8}, "varied": {"max-num-seqs": 8} if cfg != "base" else {},
        "scenario": scen, "repeat": rep, "status": status, "run_dir": f"runs/{cfg}__{scen}__r{rep}",
        "startup_s": 12.5, "startup_facts": facts, "reason": reason,
        "metrics": {"goodput_req_per_s": goodput, "req_per_s": goodput * 2, "preemptions": 3.0} if status == "complete" else {},
    }


def test_run_metrics_reads_the_summary_blocks():
    summary = {
        "latency_ms": {"ttft": {"p50": 10, "p99": 90, "count": 5}, "itl_token": {"p50": 2, "p99": 9, "count": 50},
                       "itl_chunk": {"p50": 4, "p99": 18, "count": 25}, "e2e": {"p50": 300, "p99": 900}},
        "requests": {"rps": 3.5, "completed": 70, "failed": 1},
        "tokens": {"output_per_s": 800.0, "input_per_s": 1200.0},
        "goodput": {"overall": {"good": 60, "rps": 3.0, "fraction": 0.857}},
        "engine": {"kv_usage": {"max": 0.97}, "preemptions": {"count": 12, "per_s": 0.5}, "prefix_cache": {"hit_rate": 0.4}},
    }
    m = run_metrics(summary)
    assert m["ttft_p99_ms"] == 90 and m["itl_p50_ms"] == 2 and m["itl_p99_ms"] == 9 and m["e2e_p50_ms"] == 300
    assert m["req_per_s"] == 3.5 and m["output_tok_per_s"] == 800 and m["goodput_req_per_s"] == 3.0
    assert m["kv_usage_max"] == 0.97 and m["preemptions"] == 12 and m["prefix_hit_rate"] == 0.4
    assert run_metrics({})["ttft_p50_ms"] is None


def test_summary_csv_has_a_row_per_cell_with_facts():
    rows = list(csv.DictReader(io.StringIO(summary_csv([
        entry("base", "mixed", 1, kv_cache_tokens=1000, max_concurrency=2.5, custom_fact="x"),
        entry("max-num-seqs=8", "mixed", 1, status="failed", reason="engine exited with code 1"),
    ]))))
    assert [r["status"] for r in rows] == ["complete", "failed"]
    assert rows[0]["kv_cache_tokens"] == "1000" and rows[0]["custom_fact"] == "x" and rows[0]["startup_s"] == "12.5"
    assert rows[1]["varied"] == "max-num-seqs=8" and rows[1]["reason"] == "engine exited with code 1"
    assert set(rows[0]) >= {"ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms", "e2e_p99_ms",
                            "req_per_s", "output_tok_per_s", "goodput_req_per_s", "kv_usage_max", "preemptions", "prefix_hit_rate"}


def test_ranking_averages_repeats_and_puts_failures_last():
    entries = [
        entry("a", "s", 1, goodput=1.0), entry("a", "s", 2, goodput=3.0),
        entry("b", "s", 1, goodput=2.5), entry("b", "s", 2, status="failed", reason="boom"),
        entry("c", "s", 1, status="failed", reason="no start"),
        entry("a", "t", 1, goodput=9.0),
    ]
    r = ranking(entries)
    assert [row["config_id"] for row in r["s"]] == ["b", "a", "c"]
    assert r["s"][1]["goodput"] == 2.0 and r["s"][0]["status"] == "some failed"
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
