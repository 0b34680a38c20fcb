"""Flags -> argv: replace-or-append like vLLM's apply_to_cmd, booleans, JSON, removal."""

from harness.sweep.flags import apply_flags, describe, render_flag, substitute

CMD = ["vllm", "serve", "M", "--port", "8000", "--max-num-seqs", "64", "--enforce-eager"]


def test_append_and_replace():
    out = apply_flags(CMD, {"max-num-seqs": 128, "max-num-batched-tokens": 2048})
    assert out == ["vllm", "serve", "M", "--port", "8000", "--max-num-seqs", "128", "--enforce-eager",
                   "--max-num-batched-tokens", "2048"]


def test_replace_matches_either_spelling_and_equals_form():
    assert apply_flags(["x", "--max_num_seqs", "4"], {"max-num-seqs": 8}) == ["x", "--max-num-seqs", "8"]
    assert apply_flags(["x", "--max-num-seqs=4", "M"], {"max_num_seqs": 8}) == ["x", "--max_num_seqs", "8", "M"]


def test_booleans():
    assert render_flag("enable-prefix-caching", True) == ["--enable-prefix-caching"]
    assert render_flag("enable-prefix-caching", False) == ["--no-enable-prefix-caching"]
    # an existing switch of either polarity is replaced, not duplicated
    assert apply_flags(["x", "--enforce-eager", "M"], {"enforce-eager": False}) == ["x", "--no-enforce-eager", "M"]
    assert apply_flags(["x", "--no-enable-prefix-caching"], {"enable-prefix-caching": True}) == ["x", "--enable-prefix-caching"]


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


def test_a_sweep_over_a_vllm_switch_starts_its_false_config(write_sweep, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """vLLM's switches are `--X`/`--no-X` (BooleanOptionalAction); a sweep renders `false` as
    `--no-enforce-eager`, which the simulator refused, so the false config never started (issue 25)."""
    import json
    import subprocess
    import sys

    path = write_sweep({"name": "eager", "engine": {"kind": "sim", "ready_timeout_s": 60, "stop_timeout_s": 10},
                        "base": {"sim-speed": 8, "startup-delay": 0},
                        "vary": {"flags": {"enforce-eager": [True, False]}, "include_base": False},
                        "overrides": {"load.requests": 4}})
    main = [sys.executable, "-m", "harness.cli.main", "sweep", str(path)]
    plan = subprocess.run([*main, "--plan"], capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    assert " --enforce-eager" in plan.stdout and " --no-enforce-eager" in plan.stdout
    out = tmp_path / "out"
    proc = subprocess.run([*main, "--out", str(out), "--quiet", "--no-report"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = json.loads((out / "index.json").read_text())["cells"]
    assert sorted(c["flags"]["enforce-eager"] for c in cells) == [False, True]
    assert all(c["status"] == "complete" for c in cells), [(c["id"], c["status"], c.get("reason")) for c in cells]
