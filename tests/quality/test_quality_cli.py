"""Quality through the commands a user types, over the simulated engine's HTTP: a sweep marks a
config that fails the gate and never ranks it best; `harness compare` prints the quality verdict
beside the latency verdict and exits 1 on a quality regression; bad quality files and blocks are
one-line errors (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_here import harness_here

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT / "scenarios" / "datasets" / "quality_sim.jsonl"
FAST = "--sim-speed 50 --disable-log-stats"


def harness(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def scenario(tmp_path: Path, quality: dict | None = None) -> Path:
    data = {
        "name": "q",
        "seed": 0,
        "load": {"concurrency": 2, "requests": 8},
        "warmup": {"requests": 0},
        "workload": {"classes": [{"name": "c", "input_tokens": 32, "output_tokens": 8}]},
        "quality": quality
        if quality is not None
        else {
            "prompts": str(PROMPTS),
            "max_tokens": 16,
            "gate": {"min_exact_agreement": 0.95, "max_accuracy_drop": 0.01},
        },
    }
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_compare_prints_the_quality_verdict_beside_latency_and_exits_1_on_a_quality_regression(tmp_path, capsys):
    scen = scenario(tmp_path)
    # --no-report: compare reads summary.json and quality.jsonl; a report costs ~1.3 CPU-s a run.
    # The two runs are independent (each starts its own simulated engine): started together
    runs = {
        name: subprocess.Popen(
            [
                *(sys.executable, "-m", "harness.cli.main", "run", str(scen), "--out", str(tmp_path / name)),
                *("--quiet", "--no-report", "--sim-args", sim_args),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for name, sim_args in (("base", FAST), ("fp8", f"{FAST} --kv-cache-dtype fp8 --sim-fp8-kv-error 0.5"))
    }
    try:
        for proc in runs.values():
            _out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert (tmp_path / "fp8" / "quality.jsonl").is_file()

    # compare reads the two run directories and starts nothing: in this process
    bad = harness_here(capsys, "compare", str(tmp_path / "base"), str(tmp_path / "fp8"))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    last = bad.stdout.strip().splitlines()[-1]
    assert last.startswith("FAIL: latency and throughput: no regression") or "regression" in last
    assert "quality FAIL" in last and "agree" in last
    assert "quality verdict [fp8]: FAIL" in bad.stdout and "exact agreement" in bad.stdout

    same = harness_here(capsys, "compare", str(tmp_path / "base"), str(tmp_path / "base"), "--json")
    assert same.returncode == 0, same.stdout
    doc = json.loads(same.stdout)
    assert doc["quality"][0]["status"] == "pass" and doc["quality"][0]["agreement"]["exact_rate"] == 1.0
    assert "quality PASS" in doc["verdict"]


def test_a_sweep_marks_the_config_that_fails_the_gate_and_never_ranks_it_best(tmp_path):
    scen = scenario(tmp_path, quality={})
    data = yaml.safe_load(scen.read_text())
    del data["quality"]
    scen.write_text(yaml.safe_dump(data))
    sweep = {
        "name": "qs",
        "engine": {"kind": "sim", "ready_timeout_s": 60},
        # fp8 is made faster too (a smaller model step), so only the quality gate keeps it from winning
        "base": {"sim-speed": 50, "disable-log-stats": True, "kv-cache-dtype": "auto", "sim-fp8-kv-error": 0.5},
        "vary": {"flags": {"kv-cache-dtype": ["fp8"]}},
        "scenarios": ["q.yaml"],
        "quality": {
            "prompts": str(PROMPTS),
            "max_tokens": 16,
            "baseline": "base",
            "gate": {"min_exact_agreement": 0.95},
        },
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep, sort_keys=False))
    proc = harness("sweep", str(tmp_path / "sweep.yaml"), "--out", str(tmp_path / "out"), "--no-report", timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    q = {c["config_id"]: c.get("quality") for c in index["cells"]}
    fp8 = next(cid for cid in q if cid != "base")
    assert q["base"]["status"] == "baseline" and q[fp8]["status"] == "fail" and q[fp8]["passed"] is False
    assert q[fp8]["exact_agreement"] < 0.95
    verdicts = json.loads((tmp_path / "out" / "quality.json").read_text())
    assert verdicts["configs"][fp8]["status"] == "fail"
    from harness.results.read import load_sweep
    from harness.sweep.results import ranking

    ranked = next(iter(ranking(load_sweep(tmp_path / "out").cells).values()))
    assert ranked[0].config_id == "base"  # never the failing config, whatever its speed
    assert "FAIL" in proc.stdout  # the closing table marks it


BAD_LINES = [
    ('{"prompt": "a"\n', "not JSON"),
    ('{"id": "x"}\n', "prompt"),
    ('{"prompt": "a", "match": "fuzzy", "expected": "a"}\n', "match"),
    ('{"prompt": "a", "expected": "(", "match": "regex"}\n', "regex"),
    ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "already used"),
    ("", "no prompts"),
    # Python's int digit limit is a ValueError, no JSONDecodeError: it escaped as an internal error (exit 70)
    ('{"prompt": "a", "max_tokens": ' + "1" * 5000 + "}\n", "not JSON (Exceeds the limit (4300 digits)"),
]


@pytest.mark.parametrize(
    "text,needle", BAD_LINES, ids=["json", "no-prompt", "match", "regex", "dup-id", "empty", "digits"]
)
def test_a_bad_prompts_file_is_one_line_naming_the_problem(tmp_path, text, needle, capsys, monkeypatch):
    (tmp_path / "bad.jsonl").write_text(text)
    scen = scenario(tmp_path, {"prompts": "bad.jsonl"})
    monkeypatch.chdir(ROOT)
    proc = harness_here(
        capsys, "quality", str(scen), "--target", "http://127.0.0.1:9"
    )  # nothing is started before the check
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "quality.prompts" in lines[0] and needle.lower() in lines[0].lower(), lines[0]


@pytest.mark.parametrize(
    "block,field",
    [
        ({"prompts": "x.jsonl", "max_tokns": 5}, "quality.max_tokns"),
        ({"prompts": "x.jsonl", "gate": {"min_exact_agreement": 1.5}}, "quality.gate.min_exact_agreement"),
        ({"max_tokens": 5}, "quality.prompts"),
        ({"prompts": "missing.jsonl"}, "quality.prompts"),
        (
            {"prompts": "x.jsonl", "max_tokens": 10**12},
            "quality.max_tokens: 1,000,000,000,000 tokens in one request is above the limit",
        ),
    ],
)
def test_a_bad_quality_block_is_one_line_with_its_field(tmp_path, block, field, capsys, monkeypatch):
    (tmp_path / "x.jsonl").write_text('{"prompt": "a"}\n')
    monkeypatch.chdir(ROOT)
    proc = harness_here(capsys, "quality", str(scenario(tmp_path, block)), "--target", "http://127.0.0.1:9")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and field in lines[0], proc.stderr


def test_prompts_that_fail_at_the_server_are_said_on_stderr(tmp_path, fake_openai):
    """Audit R18: every prompt failing ended exit 1 with nothing on stderr (only quality.json said so)."""
    out = tmp_path / "out"
    proc = harness(
        "quality", str(scenario(tmp_path)), "--target", fake_openai.url, "--model", "error500", "--out", str(out)
    )
    assert proc.returncode == 1
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith("error: 64 of 64 prompts failed (first, repeat-01: HTTP 500") and line.endswith(
        f"see {out / 'quality.jsonl'}"
    )
