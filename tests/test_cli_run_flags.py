"""`harness run` as Locust, vllm bench, GuideLLM and k6 users type it: -u/-r/-t, durations like 30s,
a quick run with no scenario file, --header/--api-key-env/--tokenizer/--set, --csv/--json and
--percentiles; plus --help defaults, shell completion and the /v1 hint."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import yaml
from cli_here import harness_here
from test_cli_run import _file, harness


def test_quick_run_without_a_file_with_locust_flags_and_exports(fake_openai, tmp_path: Path) -> None:
    out = tmp_path / "q"
    proc = harness(
        "run",
        "--target",
        fake_openai.url,
        "--input-tokens",
        "12",
        "--output-tokens",
        "3",
        "--requests",
        "10",
        "-u",
        "2",
        "-r",
        "4",
        "--header",
        "X-Team: bench",
        "--api-key-env",
        "BENCH_KEY",
        "--set",
        "sampling.temperature=0.5",
        "--percentiles",
        "50,95,99.9",
        "--no-telemetry",
        "--no-report",
        "--csv",
        str(tmp_path / "x" / "r.csv"),
        "--json",
        str(tmp_path / "r.json"),
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load((out / "scenario.yaml").read_text())
    assert resolved["name"] == "quick" and resolved["load"]["concurrency"] == 2 and resolved["load"]["requests"] == 10
    assert resolved["load"]["ramp_s"] == 0.5  # 2 users at 4 users/s
    (cls,) = resolved["workload"]["classes"]
    assert cls["input_tokens"] == {"dist": "fixed", "value": 12} and cls["output_tokens"]["value"] == 3
    assert resolved["target"]["headers"] == {"X-Team": "bench"} and resolved["target"]["api_key_env"] == "BENCH_KEY"
    assert resolved["sampling"]["temperature"] == 0.5
    # console table: the chosen percentiles as columns
    header = next(line for line in proc.stdout.splitlines() if "latency (ms)" in line)
    assert header.split()[2:] == ["p50", "p95", "p99.9", "max", "mean"]
    rows = list(csv.DictReader((tmp_path / "x" / "r.csv").open()))
    ttft = next(r for r in rows if r["class"] == "_all" and r["metric"] == "ttft")
    assert int(ttft["count"]) == 10 and float(ttft["p50"]) <= float(ttft["p95"]) <= float(ttft["max"])
    assert {r["class"] for r in rows} == {"_all", "default"}
    exported = json.loads((tmp_path / "r.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert exported["requests"] == summary["requests"] and exported["percentiles"] == [50, 95, 99.9]
    assert (
        exported["percentiles_ms"]["_all"]["ttft"]["p95"] == float(ttft["p95"])
        or abs(exported["percentiles_ms"]["_all"]["ttft"]["p95"] - float(ttft["p95"])) < 1e-3
    )


def test_duration_spellings_on_the_command_line(fake_openai, tmp_path: Path, capsys) -> None:
    out = tmp_path / "t"
    proc = harness(
        "run",
        str(_file(tmp_path)),
        "--target",
        fake_openai.url,
        "-t",
        "1500ms",
        "--warmup",
        "0s",
        "--no-telemetry",
        "--no-report",
        "--quiet",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load((out / "scenario.yaml").read_text())["load"]["duration_s"] == 1.5
    bad = harness_here(capsys, "run", str(_file(tmp_path)), "--duration", "5 minutes")
    assert bad.returncode == 2 and "is not a duration" in bad.stderr and "Traceback" not in bad.stderr


def test_flag_errors_are_one_line_naming_the_flag(tmp_path: Path, capsys) -> None:
    """In this process (harness_here): each error comes from the flags, before anything starts."""
    cases = [
        (["run"], "--input-tokens N and --output-tokens N"),
        (["run", "--input-tokens", "5"], "--input-tokens N and --output-tokens N"),
        (["run", str(_file(tmp_path)), "--input-tokens", "5"], "quick run without a scenario file"),
        (["run", str(_file(tmp_path)), "--concurrency", "2", "--rate", "3"], "--concurrency/-u and --rate: give one"),
        (["run", str(_file(tmp_path)), "--header", "nocolon"], "expected 'Name: value'"),
        (["run", str(_file(tmp_path)), "--set", "noequals"], "expected KEY.PATH=VALUE"),
        (["run", str(_file(tmp_path)), "--percentiles", "50,abc"], "'abc' is not a number"),
        (["run", str(_file(tmp_path)), "--percentiles", "150"], "outside (0, 100]"),
        (["run", str(_file(tmp_path)), "--tokenizer", str(tmp_path / "none")], "--tokenizer"),
        (["run", str(_file(tmp_path)), "--rate", "3", "-r", "2"], "closed loop"),
        (["run", str(_file(tmp_path)), "--set", "load.bogus=1"], "load.bogus: unknown key"),
    ]
    for argv, needle in cases:
        proc = harness_here(capsys, *argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], (argv, proc.stderr)
    # both load modes: the flags are blamed, not the scenario file
    proc = harness_here(capsys, "run", str(_file(tmp_path)), "--concurrency", "2", "--rate", "3")
    assert str(tmp_path) not in proc.stderr
    # one of them as a real process: no traceback, the same single line
    proc = harness("run", str(_file(tmp_path)), "--set", "load.bogus=1")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_target_with_v1_gets_the_server_root_hint(fake_openai, tmp_path: Path) -> None:
    proc = harness("run", str(_file(tmp_path)), "--target", fake_openai.url + "/v1", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert f"give the server root, --target {fake_openai.url}" in proc.stderr


def test_help_shows_defaults_on_every_command(capsys) -> None:
    run = harness_here(capsys, "run", "--help").stdout
    assert "(default: 1)" in " ".join(run.split())  # --processes
    ui = " ".join(harness_here(capsys, "ui", "--help").stdout.split())
    assert "merges them (default: 0)" in ui and "(default 8089) (default" not in ui
    for cmd in (["sweep"], ["compare"], ["baseline", "save"], ["sim"], ["report"], ["gh-summary"], ["completion"]):
        proc = harness_here(capsys, *cmd, "--help")
        assert proc.returncode == 0 and "usage:" in proc.stdout, cmd


def _complete(script: Path, *words: str) -> list[str]:
    cmd = (
        f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
        "COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _harness; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30, check=True).stdout
    return [w for w in out.splitlines() if w]


def test_bash_completion_completes_commands_flags_and_choices(tmp_path: Path, capsys) -> None:
    proc = harness_here(capsys, "completion", "bash")
    assert proc.returncode == 0
    script = tmp_path / "harness.bash"
    script.write_text(proc.stdout)
    assert "sweep" in _complete(script, "harness", "")
    assert _complete(script, "harness", "ru") == ["run"]
    assert _complete(script, "harness", "run", "--percen") == ["--percentiles"]
    assert _complete(script, "harness", "run", "--api", "") == ["openai-chat", "openai-completions"]
    assert _complete(script, "harness", "baseline", "sa") == ["save"]
    assert "--force" in _complete(script, "harness", "baseline", "save", "--f")
    zsh = harness_here(capsys, "completion", "zsh").stdout
    assert zsh.startswith("autoload -U +X bashcompinit") and "complete -o filenames" in zsh


def test_a_key_given_in_a_header_is_sent_but_written_nowhere(fake_openai, tmp_path: Path, capsys) -> None:
    """Audit R2: `--header 'Authorization: Bearer ...'` put the key in clear into scenario.yaml and
    load_plan.json. Now every file holds `[redacted]`, and every load process (one, several, a
    Locust master's worker) still sends the real value."""
    key = "sk-HDR-7f3a9cQ2-CLI"
    for extra in ([], ["--processes", "2"], ["--distributed", "1"]):
        out = tmp_path / f"run{len(extra)}{extra[-1] if extra else ''}"
        fake_openai.authorization.clear()
        proc = harness(
            "run",
            str(_file(tmp_path)),
            "--target",
            fake_openai.url,
            "--requests",
            "6",
            "--warmup",
            "0",
            "--header",
            f"Authorization: Bearer {key}",
            "--header",
            "X-Team: bench",
            "--no-telemetry",
            "--no-report",
            "--quiet",
            "--out",
            str(out),
            *extra,
        )
        assert proc.returncode == 0, (extra, proc.stderr)
        sent = [a for a in fake_openai.authorization if a is not None]
        assert len(sent) >= 6 and set(sent) == {f"Bearer {key}"}, (extra, fake_openai.authorization)
        written = [f.name for f in out.rglob("*") if f.is_file() and "7f3a9cQ2" in f.read_text(errors="replace")]
        assert written == [], extra
        headers = yaml.safe_load((out / "scenario.yaml").read_text())["target"]["headers"]
        assert headers == {"Authorization": "[redacted]", "X-Team": "bench"}
        assert (out / ("load_plan.w0.json" if "--processes" in extra else "load_plan.json")).is_file()
    # a URL with user:password@ was written to scenario.yaml and quoted in the error: refused, masked
    # (before anything starts: in this process)
    proc = harness_here(
        capsys,
        "run",
        str(_file(tmp_path)),
        "--target",
        fake_openai.url.replace("//", "//user:pw-7f3a9cQ2@"),
        "--out",
        str(tmp_path / "urlcred"),
    )
    assert proc.returncode == 2 and "credentials in the URL" in proc.stderr and "7f3a9cQ2" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
