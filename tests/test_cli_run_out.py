"""A `harness run` that never started leaves --out as it found it (audit N7: a wrong --model
failed the preflight with the right one-line error, exit 2, but left scenario.yaml in --out).
Against the simulated engine over real HTTP: a server of its own for --target, and the built-in
one (which writes its sim.log into --out) without it."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_here import harness_here
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
MIXED = str(ROOT / "scenarios" / "mixed.yaml")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    url = f"http://127.0.0.1:{_free_port()}"
    server = subprocess.Popen(
        [sys.executable, "-m", "harness.sim", "--port", url.rsplit(":", 1)[1]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _up(url), f"the simulated engine at {url}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def wrong_model(capsys: pytest.CaptureFixture[str], out: Path, *more: str) -> None:
    got = harness_here(capsys, "run", MIXED, *more, "--model", "my-model", "--duration", "3", "--out", str(out))
    assert got.returncode == 2, got.stderr
    assert got.stderr.strip().splitlines()[-1].startswith("error: target.model 'my-model' is not served by")


def test_a_directory_the_run_created_is_removed(sim_url, tmp_path, capsys):
    out = tmp_path / "results" / "try2"  # both levels made by the run
    wrong_model(capsys, out, "--target", sim_url)
    assert not (tmp_path / "results").exists()
    assert list(tmp_path.iterdir()) == []


def test_the_users_files_stay_and_the_runs_go(sim_url, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")  # not a run's file: --force keeps it too
    wrong_model(capsys, out, "--target", sim_url, "--force")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "mine"
    # the corrected command then runs there and keeps its record
    got = harness_here(
        capsys,
        "run",
        MIXED,
        "--target",
        sim_url,
        "--requests",
        "2",
        "--warmup",
        "0",
        "--no-telemetry",
        "--no-report",
        "--quiet",
        "--out",
        str(out),
        "--force",
    )
    assert got.returncode == 0, got.stderr
    assert {"notes.txt", "scenario.yaml", "summary.json", "load_plan.json"} <= {p.name for p in out.iterdir()}


def test_the_built_in_simulators_log_goes_too(tmp_path, capsys):
    out = tmp_path / "embedded"
    wrong_model(capsys, out)
    assert not out.exists()


def test_a_file_the_error_names_is_kept(tmp_path):
    from harness.cli.out_untouched import OutBefore
    from harness.errors import TargetError

    out = tmp_path / "o"
    before = OutBefore.take(out, OutBefore.missing_part(out))
    out.mkdir()
    (out / "scenario.yaml").write_text("name: x\n")
    (out / "sim.log").write_text("boom\n")
    kept = before.restore(TargetError(f"the simulated engine was not ready within 60 s; see {out / 'sim.log'}"))
    assert kept == [out / "sim.log"]
    assert sorted(p.name for p in out.iterdir()) == ["sim.log"]


def test_a_run_whose_load_started_is_left_alone(tmp_path):
    from harness.cli.out_untouched import OutBefore

    out = tmp_path / "o"
    before = OutBefore.take(out, OutBefore.missing_part(out))
    out.mkdir()
    for name in ("scenario.yaml", "load_plan.json", "load.log"):
        (out / name).write_text("x")
    assert before.restore(KeyboardInterrupt()) == []
    assert sorted(p.name for p in out.iterdir()) == ["load.log", "load_plan.json", "scenario.yaml"]
