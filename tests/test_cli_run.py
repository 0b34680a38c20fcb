"""`harness run` command line: overrides reach the run, preflight failures are one line, exit codes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml
from cli_here import harness_here

SCENARIO = """\
name: cli
load: {concurrency: 2, duration_s: 600}
sampling:
  extra_body: {itl_ms: 0.2}
workload:
  classes:
    - name: a
      input_tokens: 6
      output_tokens: 3
"""


def harness(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=dict(os.environ),
    )


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "cli.yaml"
    path.write_text(SCENARIO)
    return path


def test_rate_and_requests_overrides_run_open_loop(fake_openai, tmp_path: Path) -> None:
    """--rate replaces the file's concurrency, --requests its duration; no --out: results/<time>-<name>/;
    --user-clock is recorded as the clock used; --processes 2 still gives one requests.jsonl;
    --reader python is recorded as the reader that ran."""
    proc = harness(
        "run",
        str(_file(tmp_path)),
        "--target",
        fake_openai.url,
        "--rate",
        "40",
        "--requests",
        "8",
        "--seed",
        "5",
        "--api",
        "openai-completions",
        "--user-clock",
        "--processes",
        "2",
        "--no-telemetry",
        "--no-report",
        "--quiet",
        "--reader",
        "python",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "results").iterdir()
    assert run_dir.name.endswith("Z-cli")
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["load"]["mode"] == "open" and s["load"]["rate"] == 40.0 and s["load"]["requests"] == 8
    assert "concurrency" not in s["load"]
    assert s["requests"]["completed"] == 8 and s["target"]["api"] == "openai-completions"
    assert s["latency_ms"]["send_lag"]["count"] == 8  # open loop: every request has a send lag
    assert s["target"]["model"] == "ok"  # first model of /v1/models
    assert s["timing"]["clock"] == "user" and s["timing"]["requests_by_clock"] == {"user": 8}
    resolved = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    assert resolved["load"]["concurrency"] is None and resolved["load"]["duration_s"] is None
    assert resolved["seed"] == 5 and resolved["target"]["url"] == fake_openai.url
    lines = [json.loads(rec) for rec in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert all(rec["intended_ns"] is not None and rec["send_lag_ms"] is not None for rec in lines)
    # two load processes: their shares are joined into the one requests.jsonl of the contract
    assert s["client"]["processes"] == 2 and sorted(rec["i"] for rec in lines) == list(range(8))
    assert s["client"]["reader"] == "python" and s["client"]["rss_peak_mib"] > 10
    assert not list(run_dir.glob("requests.w*.jsonl")) and not list(run_dir.glob("progress.w*.jsonl"))
    assert {json.loads(rec)["worker"] for rec in (run_dir / "progress.jsonl").read_text().splitlines()} == {0, 1}


def test_unreachable_target_is_one_line_exit_2(tmp_path: Path) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = harness("run", str(_file(tmp_path)), "--target", f"http://127.0.0.1:{port}", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: target http://127.0.0.1:{port}: cannot connect ([Errno 111] Connection refused); "
        "start the engine or fix --target"
    ]


def test_unknown_model_is_one_line_exit_2(fake_openai, tmp_path: Path) -> None:
    proc = harness(
        "run", str(_file(tmp_path)), "--target", fake_openai.url, "--model", "nope", "--out", str(tmp_path / "r")
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: target.model 'nope' is not served by {fake_openai.url}; served: ok, chatml, scaled (use --model)"
    ]
    # the corrected command runs in the same --out: the failed attempt measured nothing (audit N7:
    # its scenario.yaml made the retry "not empty (an earlier run?)")
    proc = harness(
        "run",
        str(_file(tmp_path)),
        "--target",
        fake_openai.url,
        "--requests",
        "3",
        "--no-telemetry",
        "--no-report",
        "--quiet",
        "--out",
        str(tmp_path / "r"),
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["requests"]["completed"] == 3
    # a directory that holds a measured run is still refused
    proc = harness(
        "run", str(_file(tmp_path)), "--target", fake_openai.url, "--requests", "3", "--out", str(tmp_path / "r")
    )
    assert proc.returncode == 2 and "not empty (an earlier run?)" in proc.stderr


def test_fail_on_invalid_exits_99_with_the_warnings_text(fake_openai, tmp_path: Path) -> None:
    """CI can fail a run that carries validity warnings (issue 25): here the server counts 10 %
    more prompt tokens than intended (tests/fake_openai.py `scaled`)."""
    path = tmp_path / "varied.yaml"
    path.write_text(SCENARIO.replace("input_tokens: 6", "input_tokens: {dist: uniform, min: 20, max: 300}"))
    proc = harness(
        "run",
        str(path),
        "--target",
        fake_openai.url,
        "--model",
        "scaled",
        "--requests",
        "30",
        "--no-telemetry",
        "--no-report",
        "--quiet",
        "--fail-on",
        "invalid",
        "--out",
        str(tmp_path / "r"),
    )
    assert proc.returncode == 99, proc.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["validity"]["ok"] is False
    assert "error: threshold invalid failed: the run has" in proc.stderr
    for warning in summary["validity"]["warnings"]:
        assert f"  - {warning}" in proc.stderr
    assert "prompt token counts disagree" in proc.stderr


def test_bad_override_value_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    path = _file(tmp_path)
    proc = harness_here(capsys, "run", str(path), "--concurrency", "0")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {path}: load.concurrency: must be greater than 0"]
    proc = harness_here(capsys, "run", str(path), "--processes", "0")
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --processes must be at least 1"


def test_missing_tokenizer_is_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(SCENARIO.replace("workload:\n", "workload:\n  tokenizer: no/such/dir\n"))
    proc = harness_here(capsys, "run", str(path), "--target", "http://127.0.0.1:1", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: workload.tokenizer: no/such/dir has no tokenizer.json")


def test_every_request_failing_exits_1_with_a_line(tmp_path: Path) -> None:
    """Preflight passes, then every load connection is closed before a response."""
    sys.path.insert(0, str(Path(__file__).parent / "client"))
    from rawhttp import RawServer, chunked, sse_head

    models = json.dumps({"data": [{"id": "m"}]}).encode()
    scripts = [
        [
            ("request",),
            (
                "send",
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(models), models),
            ),
            ("close",),
        ],
        [
            ("request",),
            (
                "send",
                sse_head("Transfer-Encoding: chunked\r\nConnection: close\r\n")
                + chunked(b'data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n'),
            ),
            ("close",),
        ],
    ]  # then every connection: closed before a response
    path = tmp_path / "f.yaml"
    path.write_text(
        SCENARIO.replace("duration_s: 600", "requests: 3").replace(
            "sampling:\n", "target: {continuous_usage: 'off'}\nsampling:\n"
        )
    )
    out = tmp_path / "r"
    with RawServer(scripts) as server:
        proc = harness(
            "run", str(path), "--target", server.url, "--out", str(out), "--no-telemetry", "--no-report", "--quiet"
        )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: no request completed in the measured window (disconnect 3); results kept in {out} "
        "(see requests.jsonl and load.log)"
    )
    s = json.loads((out / "summary.json").read_text())
    assert s["requests"]["errors_by_kind"] == {"disconnect": 3} and s["requests"]["completed"] == 0
    assert s["validity"]["ok"] is False
    # summary.json agrees with the exit status (audit R16: it said complete)
    assert (
        s["status"] == "failed" and s["status_reason"] == "no request completed in the measured window (disconnect 3)"
    )
    lines = [json.loads(rec) for rec in (out / "requests.jsonl").read_text().splitlines()]
    assert [rec["error"] for rec in lines] == ["disconnect"] * 3
