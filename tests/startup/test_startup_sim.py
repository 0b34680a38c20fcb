"""`harness startup` end to end on the simulated engine: real processes, real logs, real caches.

The simulator's phases are sleeps (harness/sim/startup.py), so what is asserted is structure, not
speed: warm starts hit the compile cache that the cold start filled, the phases read from the log
add up to the measured time to ready, --enforce-eager has no compile or capture phase, the
scenario runs on the last warm start, and bad files are one-line errors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "sweep" / "data"
PHASES = {
    "sim-load-s": 0.2,
    "sim-compile-s": 1.0,
    "sim-compile-cached-s": 0.1,
    "sim-profile-s": 0.05,
    "sim-capture-s": 0.3,
    "sim-init-s": 0.05,
}


def _write(tmp_path: Path, **over) -> Path:
    (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
    data = {
        "name": "t",
        "engine": {"kind": "sim", "ready_timeout_s": 60, "stop_timeout_s": 10},
        "base": {"max-num-seqs": 16, "sim-speed": 20, **PHASES},
        "vary": {"flags": {"enforce-eager": [True]}},
        "cold": 1,
        "warm": 1,
        **over,
    }
    path = tmp_path / "startup.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("startup")
    path = _write(tmp, scenario="tiny.yaml")
    out = tmp / "out"
    code = main(["startup", str(path), "--out", str(out)])
    return code, out, json.loads((out / "startup.json").read_text()), path


def test_runs_and_writes_startup_json_and_report(done):
    code, out, data, _ = done
    assert code == 0
    assert [s["id"] for s in data["starts"]] == [
        "base__cold1",
        "base__warm1",
        "enforce-eager=true__cold1",
        "enforce-eager=true__warm1",
    ]
    assert all(s["status"] == "ok" for s in data["starts"])
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    assert "Time to ready by phase" in (out / "report.md").read_text()
    assert (out / "logs" / "base.log").is_file()
    # one figure per config: stacked phase bars, cold and warm
    from harness.report.startup_view import build_startup_report

    doc = build_startup_report(out)
    fig = doc.figures["startup_base"].figure
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["cold", "warm"]
    assert [c.get_label() for c in fig.axes[0].containers][:2] == ["weight loading", "compilation"]


def test_warm_start_loads_what_the_cold_start_compiled(done):
    _, _, data, _ = done
    starts = {s["id"]: s for s in data["starts"]}
    cold, warm = starts["base__cold1"], starts["base__warm1"]
    assert cold["facts"]["compile_cache_hit"] is False and warm["facts"]["compile_cache_hit"] is True
    assert warm["cache_dir"] == cold["cache_dir"]
    assert warm["phases"]["compile"] < cold["phases"]["compile"]  # 0.1 s load vs 1.0 s compile (sleeps)
    # faster to ready once process start and imports (`rest`, seconds of noise on a loaded box) are set aside
    assert warm["ready_s"] - warm["phases"]["rest"] < cold["ready_s"] - cold["phases"]["rest"]


def test_phases_add_up_to_the_time_to_ready(done):
    _, _, data, _ = done
    for s in data["starts"]:
        phases = s["phases"]
        assert abs(sum(v for v in phases.values() if v is not None) - s["ready_s"]) < 0.01
        assert s["logged_s"] <= s["ready_s"]  # the log never claims more than the clock saw
        assert phases["rest"] >= 0 and phases["load"] > 0 and phases["kv_profile"] is not None


def test_eager_has_no_compile_or_capture(done):
    _, _, data, _ = done
    for s in data["starts"]:
        if s["config_id"] == "enforce-eager=true":
            assert s["phases"]["compile"] is None and s["phases"]["capture"] is None
            assert s["facts"]["cudagraph_count"] == 0
        else:
            assert s["phases"]["compile"] > 0 and s["phases"]["capture"] > 0
            assert s["facts"]["cudagraph_sizes"] == [1, 2, 4, 8, 16, 24, 32]


def test_summary_steady_state_and_tradeoff(done):
    _, _, data, _ = done
    configs = {c["id"]: c for c in data["configs"]}
    base = configs["base"]
    assert set(base["summary"]) == {"cold", "warm"}
    assert base["summary"]["cold"]["ready"]["n"] == 1 and "compile" in base["summary"]["cold"]
    for c in configs.values():
        assert c["steady"]["status"] == "complete" and c["steady"]["output_tok_per_s"] > 0
    (t,) = data["tradeoffs"]
    assert t["config_id"] == "enforce-eager=true" and t["vs"] == "base"
    assert t["cold_saved_s"] is not None and t["warm_saved_s"] is not None and t["throughput_change"] is not None
    eager = next(s for s in data["starts"] if s["id"] == "enforce-eager=true__cold1")
    graphs = next(s for s in data["starts"] if s["id"] == "base__cold1")
    assert eager["logged_s"] < graphs["logged_s"]  # no compile, no capture


def test_resume_makes_only_the_missing_starts(done, tmp_path):
    _, out, data, path = done
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    data["starts"] = [s for s in data["starts"] if s["id"] != "enforce-eager=true__cold1"]
    (copy / "startup.json").write_text(json.dumps(data))
    before = (copy / "logs" / "base.log").read_text().count("===== harness")
    assert main(["startup", str(path), "--resume", str(copy), "--no-report", "--quiet"]) == 0
    after = json.loads((copy / "startup.json").read_text())
    assert sorted(s["id"] for s in after["starts"]) == sorted(
        s["id"] for s in json.loads((out / "startup.json").read_text())["starts"]
    )
    assert (copy / "logs" / "base.log").read_text().count("===== harness") == before  # base was not started again


@pytest.mark.parametrize(
    "over, words",
    [
        ({"colder": 2}, "colder"),
        ({"cold": 0, "warm": 0}, "nothing would start"),
        ({"engine": {"kind": "external", "url": "http://127.0.0.1:9"}}, "starts the engine itself"),
        ({"scenario": "missing.yaml"}, "missing.yaml"),
        ({"overrides": {"load.duration_s": 5}}, "name a scenario"),
        ({"cold": -1}, "cold"),
    ],
)
def test_bad_startup_files_are_one_line_errors(tmp_path, capsys, over, words):
    path = _write(tmp_path, **over)
    assert main(["startup", str(path), "--plan"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_harness_report_rewrites_the_startup_report(done, capsys):
    _, out, _, _ = done
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0 and (out / "report.html").is_file()


def test_plan_starts_nothing(tmp_path, capsys):
    assert main(["startup", str(_write(tmp_path)), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "2 config(s) x (1 cold + 1 warm) = 4 engine start(s)" in out and "--enforce-eager" in out
