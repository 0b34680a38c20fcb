"""One writer per output directory (audit R3): while another process writes into a directory, every
command that would write there refuses in one line, exit 2, before touching it; two runs started at
the same moment on one --out leave one run's records, not both."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def held(tmp_path: Path):
    """An empty directory whose lock another writer holds (as a command that has not written yet)."""
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    yield out
    os.close(fd)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "scenarios/smoke.yaml", "--duration", "2", "--quiet", "--out"],
        ["sweep", "scenarios/sweeps/sim_max_num_seqs.yaml", "--quiet", "--out"],
        ["tune", "scenarios/tune/sim_prefix_off.yaml", "--quiet", "--out"],
        ["startup", "scenarios/startup/sim_eager_vs_graphs.yaml", "--out"],
        ["capacity", "scenarios/capacity_search.yaml", "--quiet", "--out"],
    ],
    ids=lambda a: a[0],
)
def test_a_directory_another_command_writes_into_is_refused(held: Path, argv: list[str], capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    if not Path(argv[1]).is_file():
        pytest.skip(f"{argv[1]} is not shipped")
    assert main([*argv, str(held)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: --out {held}: another harness command is writing into this directory right now; "
        "wait for it to end, or give another --out"
    ]
    assert list(held.iterdir()) == []


def test_two_runs_started_together_on_one_out(tmp_path: Path) -> None:
    out = tmp_path / "same"
    cmd = [
        sys.executable,
        "-m",
        "harness.cli.main",
        "run",
        "scenarios/smoke.yaml",
        "--duration",
        "2",
        "--quiet",
        "--no-report",
        "--out",
        str(out),
    ]
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    results = [(p.wait(120), p.stderr.read()) for p in procs]
    assert sorted(rc for rc, _ in results) == [0, 2], results
    (loser,) = [err for rc, err in results if rc == 2]
    assert "another harness command is writing into this directory" in loser or "not empty" in loser
    summary = json.loads((out / "summary.json").read_text())
    lines = (out / "requests.jsonl").read_text().splitlines()
    measured = [r for r in map(json.loads, lines) if not r.get("warmup")]
    req = summary["requests"]
    assert len(measured) == req["completed"] + req["failed"], (len(measured), req)
