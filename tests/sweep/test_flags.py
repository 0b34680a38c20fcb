"""Flags -> argv: replace-or-append like vLLM's apply_to_cmd, booleans, JSON, removal."""

from harness.sweep.flags import apply_flags, describe, env_of, render_flag, shell_line, substitute, with_env

CMD = ["vllm", "serve", "M", "--port", "8000", "--max-num-seqs", "64", "--enforce-eager"]


def test_append_and_replace():
    out = apply_flags(CMD, {"max-num-seqs": 128, "max-num-batched-tokens": 2048})
    assert out == [
        "vllm",
        "serve",
        "M",
        "--port",
        "8000",
        "--max-num-seqs",
        "128",
        "--enforce-eager",
        "--max-num-batched-tokens",
        "2048",
    ]


def test_replace_matches_either_spelling_and_equals_form():
    assert apply_flags(["x", "--max_num_seqs", "4"], {"max-num-seqs": 8}) == ["x", "--max-num-seqs", "8"]
    assert apply_flags(["x", "--max-num-seqs=4", "M"], {"max_num_seqs": 8}) == ["x", "--max_num_seqs", "8", "M"]


def test_booleans():
    assert render_flag("enable-prefix-caching", True) == ["--enable-prefix-caching"]
    assert render_flag("enable-prefix-caching", False) == ["--no-enable-prefix-caching"]
    # an existing switch of either polarity is replaced, not duplicated
    assert apply_flags(["x", "--enforce-eager", "M"], {"enforce-eager": False}) == ["x", "--no-enforce-eager", "M"]
    assert apply_flags(["x", "--no-enable-prefix-caching"], {"enable-prefix-caching": True}) == [
        "x",
        "--enable-prefix-caching",
    ]


def test_dicts_and_lists_are_json():
    out = apply_flags(["x"], {"speculative-config": {"method": "ngram", "num_speculative_tokens": 3}})
    assert out == ["x", "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}']
    assert apply_flags(["x"], {"cuda-graph-sizes": [1, 2, 4]}) == ["x", "--cuda-graph-sizes", "[1,2,4]"]


def test_none_removes_a_flag():
    assert apply_flags(CMD, {"max-num-seqs": None}) == ["vllm", "serve", "M", "--port", "8000", "--enforce-eager"]
    assert apply_flags(["x"], {"absent": None}) == ["x"]


def test_literal_dash_spelling_and_negative_values():
    assert apply_flags(["x", "-tp", "1"], {"-tp": 2}) == ["x", "-tp", "2"]
    assert apply_flags(["x", "--temp", "-1", "M"], {"temp": 0.5}) == ["x", "--temp", "0.5", "M"]


def test_substitute_only_known_placeholders():
    argv = ["--port", "{port}", "--model", "{model}", '{"a": 1}', "{other}"]
    assert substitute(argv, {"port": 9, "model": "m"}) == ["--port", "9", "--model", "m", '{"a": 1}', "{other}"]


def test_describe():
    assert describe({"max-num-seqs": 64, "enable-prefix-caching": False, "x": None}) == (
        "max-num-seqs=64,enable-prefix-caching=false,x=unset"
    )


def test_a_sweep_over_a_vllm_switch_starts_its_false_config(write_sweep, tmp_path) -> None:
    """vLLM's switches are `--X`/`--no-X` (BooleanOptionalAction); a sweep renders `false` as
    `--no-enforce-eager`, which the simulator refused, so the false config never started (issue 25)."""
    import json
    import subprocess
    import sys

    path = write_sweep(
        {
            "name": "eager",
            "engine": {"kind": "sim", "ready_timeout_s": 60, "stop_timeout_s": 10},
            "base": {"sim-speed": 8, "startup-delay": 0},
            "vary": {"flags": {"enforce-eager": [True, False]}, "include_base": False},
            "overrides": {"load.requests": 4},
        }
    )
    main = [sys.executable, "-m", "harness.cli.main", "sweep", str(path)]
    plan = subprocess.run([*main, "--plan"], capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    assert " --enforce-eager" in plan.stdout and " --no-enforce-eager" in plan.stdout
    out = tmp_path / "out"
    proc = subprocess.run(
        [*main, "--out", str(out), "--quiet", "--no-report"], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = json.loads((out / "index.json").read_text())["cells"]
    assert sorted(c["flags"]["enforce-eager"] for c in cells) == [False, True]
    assert all(c["status"] == "complete" for c in cells), [(c["id"], c["status"], c.get("reason")) for c in cells]


def test_environment_flags_are_no_arguments() -> None:
    flags = {"max-total-tokens": 4096, "env:PREFIX_CACHING": "0", "env:PREFILL_CHUNKING": True, "env:GONE": None}
    assert apply_flags(["text-generation-launcher"], flags) == [
        "text-generation-launcher",
        "--max-total-tokens",
        "4096",
    ]
    assert env_of(flags) == {"PREFIX_CACHING": "0", "PREFILL_CHUNKING": "1", "GONE": None}
    assert with_env({"GONE": "x", "KEEP": "y"}, flags) == {"KEEP": "y", "PREFIX_CACHING": "0", "PREFILL_CHUNKING": "1"}
    assert shell_line(["llama-server", "--port", "8"], {"env:GGML_CUDA_DISABLE_GRAPHS": "1"}) == (
        "GGML_CUDA_DISABLE_GRAPHS=1 llama-server --port 8"
    )
    assert shell_line(["x"], {"env:GGML_CUDA_DISABLE_GRAPHS": None}) == "env -uGGML_CUDA_DISABLE_GRAPHS x"


def test_a_sweep_over_an_environment_flag_starts_each_engine_with_it(write_sweep, tmp_path) -> None:
    """TGI takes prefix caching from its environment (PREFIX_CACHING): a sweep varies it like a flag,
    and each config's engine is started with its value (the fake engine logs what it got)."""
    import subprocess
    import sys

    from harness.sweep.execute import SweepOptions, run_sweep
    from harness.sweep.plan import build_plan

    from .conftest import fake_engine_command
    from .test_execute import FakeRun

    path = write_sweep(
        {
            "name": "env",
            "engine": {
                "kind": "tgi",
                "command": fake_engine_command("--style", "tgi"),
                "ready_timeout_s": 20,
                "stop_timeout_s": 5,
            },
            "vary": {"flags": {"env:PREFIX_CACHING": ["1", "0"]}, "include_base": False},
        }
    )
    plan = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "sweep", str(path), "--plan"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plan.returncode == 0, plan.stderr
    assert "  $ PREFIX_CACHING=0 " in plan.stdout and "  $ PREFIX_CACHING=1 " in plan.stdout
    out = tmp_path / "out"
    outcome = run_sweep(build_plan(path), SweepOptions(out_dir=out, run_fn=FakeRun(), show_progress=False))
    assert outcome.counts["complete"] == 2, outcome.table
    logs = {p.name: p.read_text() for p in (out / "logs").glob("*.log")}
    assert sorted(line for text in logs.values() for line in text.splitlines() if line.startswith("env ")) == [
        "env PREFIX_CACHING=0",
        "env PREFIX_CACHING=1",
    ]
