"""`harness compare`: passes like-for-like runs, fails a clearly slower candidate, refuses
mismatched fingerprints (exit codes 0/1/2), and explains how it decided."""

from __future__ import annotations

import json

import numpy as np

from harness.cli.main import main
from harness.compare import stats


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_identical_workload_passes(fx, capsys):
    code, out, err = _run(capsys, str(fx["run_a"]), str(fx["run_b"]))
    assert code == 0, out + err
    assert "fingerprints match" in out
    assert "PASS" in out and "(exit 0)" in out
    assert "How this was decided" in out and "bootstrap" in out
    assert "REGRESSION" not in out


def test_same_run_against_itself_is_all_ok(fx, capsys):
    code, out, _ = _run(capsys, str(fx["run_a"]), str(fx["run_a"]), "--json")
    assert code == 0
    rows = json.loads(out)["pairs"][0]["rows"]
    assert {r["verdict"] for r in rows} == {"ok"}
    assert all(r["change"] == 0 for r in rows)


def test_clearly_slower_candidate_fails(fx, capsys):
    code, out, _ = _run(capsys, str(fx["run_a"]), str(fx["run_slow"]))
    assert code == 1
    assert "FAIL:" in out and "(exit 1)" in out
    for label in ("ITL p50", "E2E p99", "requests/s", "output tokens/s"):
        line = next(ln for ln in out.splitlines() if ln.startswith(label))
        assert line.rstrip().endswith("REGRESSION"), line
    # direction-aware: latency went up (+), throughput went down (-), both are regressions
    assert "+4" in next(ln for ln in out.splitlines() if ln.startswith("ITL p50"))
    assert "-3" in next(ln for ln in out.splitlines() if ln.startswith("requests/s"))


def test_faster_candidate_is_an_improvement_not_a_failure(fx, capsys):
    code, out, _ = _run(capsys, str(fx["run_slow"]), str(fx["run_a"]))
    assert code == 0
    assert "improved" in out


def test_json_output(fx, capsys):
    code, out, _ = _run(capsys, str(fx["run_a"]), str(fx["run_slow"]), "--json", "--metrics", "itl.p99,rps")
    assert code == 1
    data = json.loads(out)
    assert data["exit_code"] == 1 and data["verdict"].startswith("FAIL")
    rows = data["pairs"][0]["rows"]
    assert [r["key"] for r in rows] == ["itl.p99", "rps"]
    itl, rps = rows
    assert itl["better"] == "lower" and itl["worse_by"] > 30 and itl["interval"][0] > 0
    assert rps["better"] == "higher" and rps["change"] < -25 and rps["worse_by"] > 25 and rps["interval"][1] < 0
    assert any("time blocks of requests" in t for t in itl["tests"])
    assert any("time slices" in t for t in rps["tests"])


def test_mismatched_fingerprints_are_refused_naming_the_parts(fx, capsys):
    code, out, err = _run(capsys, str(fx["run_a"]), str(fx["run_other"]))
    assert code == 2
    assert "load (load.concurrency: 16 → 32)" in err
    assert "sampling (sampling.temperature: 0.0 → 0.7)" in err
    assert "--force" in err and "Traceback" not in err
    code, out, _ = _run(capsys, str(fx["run_a"]), str(fx["run_other"]), "--force")
    assert code in (0, 1)
    assert "compared anyway: --force" in out


def test_threshold_decides_with_noise(fx, capsys):
    # 20 % allowed: the 15 % slower repeats pass; 5 %: they fail
    code, _, _ = _run(capsys, str(fx["rep_a"]), str(fx["rep_b"]), "--max-regression", "30%")
    assert code == 0
    code, out, _ = _run(capsys, str(fx["rep_a"]), str(fx["rep_b"]), "--max-regression", "5%", "-v")
    assert code == 1
    assert "(3 runs, 360 requests)" in out
    assert "repeats 3/3: every candidate run worse than every baseline run (p=0.05)" in out


def test_within_noise_is_not_a_regression(fx, capsys):
    # TTFT p99 from 200 requests is noisy: the two like-for-like runs differ, but not beyond the bootstrap interval
    code, out, _ = _run(
        capsys, str(fx["run_a"]), str(fx["run_b"]), "--metrics", "ttft.p99", "--max-regression", "1%", "--json"
    )
    row = json.loads(out)["pairs"][0]["rows"][0]
    assert code == 0
    assert abs(row["change"]) > 1 and row["verdict"] == "within noise" and row["beyond_noise"] is False


def test_comma_list_of_runs_is_a_side(fx, capsys):
    a = ",".join(str(fx[f"rep_a{i}"]) for i in range(3))
    code, out, _ = _run(capsys, a, str(fx["rep_b"]), "--metrics", "itl.p50")
    assert code == 1 and "(3 runs," in out


def test_without_per_request_records_the_threshold_alone_decides(fx, tmp_path, capsys):
    import shutil

    for name in ("run_a", "run_slow"):
        shutil.copytree(fx[name], tmp_path / name)
        (tmp_path / name / "requests.jsonl").unlink()
    code, out, _ = _run(
        capsys, str(tmp_path / "run_a"), str(tmp_path / "run_slow"), "--metrics", "ttft.p50,itl.p50", "-v"
    )
    assert code == 1
    assert "no bootstrap (no per-request records)" in out  # TTFT: threshold alone
    assert "histogram bootstrap, one sample per request" in out  # ITL: from the HDR histogram


def test_sweeps_cell_by_cell(fx, capsys):
    code, out, _ = _run(capsys, str(fx["sweep"]), str(fx["sweep_same"]), "--metrics", "itl.p50,rps")
    assert code == 0, out
    assert "== c0-base × chat-short: compared" in out
    assert "c3-seqs512 × chat-short: both failed" in out
    code, out, _ = _run(capsys, str(fx["sweep"]), str(fx["sweep_slow"]), "--metrics", "itl.p50,rps")
    assert code == 1
    assert "c2-seqs256 × chat-short: candidate failed" in out
    assert "c3-seqs512 × chat-short: baseline failed" in out
    assert "cells failed in the candidate but not in the baseline" in out


def test_unusable_input(fx, tmp_path, capsys):
    assert _run(capsys, str(tmp_path / "nope"), str(fx["run_a"]))[0] == 2
    assert _run(capsys, str(fx["sweep"]), str(fx["run_a"]))[0] == 2
    code, _, err = _run(capsys, str(fx["run_a"]), str(fx["run_b"]), "--max-regression", "lots")
    assert code == 2 and "--max-regression 'lots'" in err
    code, _, err = _run(capsys, str(fx["run_a"]), str(fx["run_b"]), "--metrics", "ttft.p42")
    assert code == 2 and "unknown metric(s) ttft.p42" in err


# ---------------------------------------------------------------- statistics
def test_order_statistic_bootstrap_matches_brute_force():
    """The Beta shortcut draws the same resampled-percentile distribution as resampling itself."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.lognormal(3, 0.6, 400))
    point, draws = stats.quantile_draws(x, 99, 20000, np.random.default_rng(1))
    assert point == x[395]  # HDR semantics: the ceil(0.99 n)-th smallest
    fast = np.bincount(np.searchsorted(x, draws), minlength=400) / draws.size
    brute_idx = [np.sort(rng.integers(0, 400, 400))[395] for _ in range(20000)]
    brute = np.bincount(brute_idx, minlength=400) / len(brute_idx)
    assert 0.5 * np.abs(fast - brute).sum() < 0.03  # total variation distance


def test_repeats_separation():
    assert stats.repeats_separated([10, 11, 12], [13, 14, 15], worse_is_higher=True) == (True, False, 0.05)
    assert stats.repeats_separated([10, 11, 12], [11.5, 14, 15], worse_is_higher=True)[:2] == (False, False)
    assert stats.repeats_separated([10, 11], [8, 9], worse_is_higher=False)[0] is True


def test_one_class_regression_hidden_in_the_overall_is_caught_per_class(tmp_path, capsys):
    """A mixed workload whose `short` class got 30% slower to first token: the overall TTFT p50 sits
    among the long class's values and moves little, so the overall verdict passes; `--class short`
    (or `--per-class`) judges the class on its own, with its own requests' bootstrap, and fails."""
    from .fabricate import make_run

    classes = (("short", 0.3, 200, 60), ("long", 0.7, 3000, 120))
    base = make_run(tmp_path / "base", seed=1, n=600, classes=classes)
    cand = make_run(tmp_path / "cand", seed=2, n=600, classes=classes, ttft_scale={"short": 1.3})
    args = [str(base), str(cand), "--metrics", "ttft.p50"]

    assert main(["compare", *args]) == 0
    capsys.readouterr()
    assert main(["compare", *args, "--class", "short"]) == 1
    out = capsys.readouterr().out
    assert "== class short: compared" in out and "REGRESSION" in out.split("== class short")[1]
    assert main(["compare", *args, "--per-class", "--json"]) == 1
    res = json.loads(capsys.readouterr().out)
    verdicts = {p["label"]: [r["verdict"] for r in p["rows"]] for p in res["pairs"]}
    assert verdicts["class short"] == ["REGRESSION"] and verdicts["class long"] != ["REGRESSION"]
    assert verdicts[""] != ["REGRESSION"]

    assert main(["compare", *args, "--class", "tiny"]) == 2
    assert "--class tiny: no such request class in either side; classes: long, short" in capsys.readouterr().err


def test_itl_bootstrap_with_a_handful_of_requests_does_not_crash(tmp_path, capsys):
    """With 3 requests a whole-request resample often draws none (Poisson weights all zero); such
    draws are dropped, so the two sides had different numbers of draws and the comparison crashed
    (seen comparing a sweep's concurrency=1 cells)."""
    from .fabricate import make_run

    base = make_run(tmp_path / "b", seed=1, n=3)
    cand = make_run(tmp_path / "c", seed=2, n=3)
    assert main(["compare", str(base), str(cand), "--metrics", "itl.p50,itl.p99", "--seed", "3"]) in (0, 1)
    assert "ITL p50" in capsys.readouterr().out


def test_a_partial_candidate_is_named_in_the_comparison(fx, tmp_path, capsys):
    """Audit D4: an interrupted (partial) candidate was compared as if complete; only a lower
    output tokens/s gave it away. The comparison must say which side is partial and why."""
    from .fabricate import make_run

    part = make_run(tmp_path / "part", seed=2, status="partial")
    summary = json.loads((part / "summary.json").read_text())
    summary["status_reason"] = "interrupted (Ctrl-C)"
    (part / "summary.json").write_text(json.dumps(summary))
    _code, out, _ = _run(capsys, str(fx["run_a"]), str(part))
    assert f"candidate {part} is a PARTIAL run (interrupted (Ctrl-C))" in out
    _, js, _ = _run(capsys, str(fx["run_a"]), str(part), "--json")
    assert any("PARTIAL" in w for w in json.loads(js)["warnings"])
    # a complete pair carries no such line
    _, clean, _ = _run(capsys, str(fx["run_a"]), str(fx["run_b"]))
    assert "PARTIAL" not in clean


def test_cell_names_are_one_argument(tmp_path, capsys):
    """Audit N8: tune named cells `enable-prefix-caching=true,max-model-len=2048__...` and
    `harness compare` split the path at the comma. Ids now join flags with '+', and a directory
    whose name holds a comma (an older sweep) is one side, not a list."""
    from harness.sweep.plan import _safe_id
    from tests.report.fabricate import make_run

    assert _safe_id("enable-prefix-caching=true,max-model-len=2048") == "enable-prefix-caching=true+max-model-len=2048"
    a = make_run(tmp_path / "runs" / "enable-prefix-caching=false,max-model-len=2048__chat__r1", seed=1, n=60)
    b = make_run(tmp_path / "runs" / "enable-prefix-caching=true,max-model-len=2048__chat__r1", seed=2, n=60)
    code, out, err = _run(capsys, str(a), str(b))
    assert code in (0, 1) and "no such directory" not in err, err
    assert "1 run" in out
