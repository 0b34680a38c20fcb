"""Record the golden result directories that tests/results/test_golden.py loads and re-serializes.

    PYTHONPATH=. python tests/results/golden/make.py            # all kinds (~5 minutes on 2 cores)
    PYTHONPATH=. python tests/results/golden/make.py run sweep  # some of them

Each kind is produced by the real CLI against the simulated engine into a temporary directory;
only the files the results models type (summary.json, index.json, capacity.json, startup.json,
tune.json, cost.json) are copied here, and of a tune or capacity search only a few of its run
directories, so the recorded tree stays small. Rerun it when `SCHEMA_VERSION` changes (and keep
the old tree under a versioned name if older directories must still load).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
INPUTS = HERE / "inputs"
SCEN = ROOT / "scenarios"
#: the files the results models type; everything else in a run directory is left out
TYPED = ("summary.json", "index.json", "capacity.json", "startup.json", "tune.json", "cost.json")

#: one run per shape of summary.json worth keeping: closed loop, open loop, offline, multi-turn
#: sessions (groups.turn, sessions), a fleet of two replicas (fleet, groups.endpoint), LoRA adapters
RUNS: dict[str, list[str]] = {
    "run-closed": [str(SCEN / "smoke.yaml"), "-t", "3", "--warmup", "1"],
    "run-open": [str(SCEN / "poisson_rate.yaml"), "--rate", "6", "-t", "3", "--warmup", "1"],
    "run-offline": [str(SCEN / "smoke.yaml"), "--offline", "--requests", "24"],
    "run-sessions": [str(SCEN / "multi_turn_chat.yaml"), "-t", "4", "--warmup", "1"],
    "run-fleet": [str(SCEN / "fleet_two_replicas.yaml"), "-t", "3", "--warmup", "1"],
    "run-lora": [str(SCEN / "lora_mix.yaml"), "-t", "3", "--warmup", "1"],
}


def harness(*args: str, baselines: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_BASELINES": str(baselines)}  # a tune saves its final run
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode not in (0, 1):  # 1: a run that went badly still writes its directory
        sys.exit(f"harness {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}")


def keep(src: Path, dest: Path, max_runs: int | None = None, skip: tuple[str, ...] = ()) -> None:
    """Copy the typed files of `src` into `dest`; of each folder of run directories keep `max_runs`
    summary.json files, and none under the `skip` folders."""
    if dest.exists():
        shutil.rmtree(dest)
    kept_runs: dict[Path, int] = {}
    for path in sorted(src.rglob("*")):
        if not path.is_file() or path.name not in TYPED:
            continue
        rel = path.relative_to(src)
        if rel.name == "summary.json" and rel.parts[0] in skip:
            continue
        if max_runs is not None and rel.name == "summary.json" and len(rel.parts) >= 2:
            parent = rel.parent.parent
            if kept_runs.get(parent, 0) >= max_runs:
                continue
            kept_runs[parent] = kept_runs.get(parent, 0) + 1
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / rel)


def make(kind: str, tmp: Path) -> None:
    out = tmp / kind
    if kind in RUNS:
        harness("run", *RUNS[kind], "--out", str(out), "--quiet", "--no-report", baselines=tmp)
        keep(out, HERE / kind)
    elif kind == "sweep":
        harness(
            "sweep",
            str(INPUTS / "sweep.yaml"),
            "--out",
            str(out),
            "--quiet",
            "--no-report",
            "--capacity-search",
            "--capacity-max-trials",
            "2",
            baselines=tmp,
        )
        keep(out, HERE / kind, max_runs=2, skip=("capacity",))
    elif kind == "tune":
        harness("tune", str(INPUTS / "tune.yaml"), "--out", str(out), "--quiet", baselines=tmp)
        keep(out, HERE / kind, max_runs=1)
    elif kind == "capacity":
        harness(
            "capacity",
            str(SCEN / "capacity_search.yaml"),
            "--sim-args=--max-num-seqs 4",
            "--duration",
            "3",
            "--warmup",
            "0.5",
            "--max-trials",
            "4",
            "--out",
            str(out),
            "--quiet",
            baselines=tmp,
        )
        keep(out, HERE / kind, max_runs=2)
    elif kind == "startup":
        harness("startup", str(INPUTS / "startup.yaml"), "--out", str(out), "--quiet", "--no-report", baselines=tmp)
        keep(out, HERE / kind, max_runs=1)
    else:
        sys.exit(f"unknown kind {kind}; kinds: {', '.join([*RUNS, 'sweep', 'tune', 'capacity', 'startup'])}")


def main(kinds: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        for kind in kinds or [*RUNS, "sweep", "tune", "capacity", "startup"]:
            print(f"recording {kind} ...", flush=True)
            make(kind, Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
