"""`harness baseline save/list` and `compare baseline:<name>`."""

from __future__ import annotations

import gzip
import json

from harness.cli.main import main


def test_save_list_compare(fx, tmp_path, capsys, monkeypatch):
    root = tmp_path / "baselines"
    monkeypatch.setenv("HARNESS_BASELINES", str(root))
    cfg = tmp_path / "vllm-serve.yaml"
    cfg.write_text("model: meta-llama/Llama-3.1-8B-Instruct\nmax-num-seqs: 128\n")

    assert main(["baseline", "save", str(fx["run_a"]), "--name", "llama8b-h100", "--engine-config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "saved baseline 'llama8b-h100'" in out and "harness compare baseline:llama8b-h100" in out
    saved = root / "llama8b-h100"
    for name in (
        "summary.json",
        "histograms.json",
        "scenario.yaml",
        "requests.jsonl.gz",
        "engine_config.yaml",
        "baseline.json",
    ):
        assert (saved / name).is_file(), name
    assert (saved / "engine_config.yaml").read_text() == cfg.read_text()
    meta = json.loads((saved / "baseline.json").read_text())
    assert meta["kind"] == "run" and meta["scenario"] == "chat" and meta["engine_config"] == "engine_config.yaml"
    assert meta["fingerprint"]["value"] and "ttft.p99" in meta["headline"]
    with gzip.open(saved / "requests.jsonl.gz", "rt") as fh:
        assert sum(1 for _ in fh) == 201  # 200 measured + 1 warmup, kept for the noise estimate

    # a second save of the same name needs --force
    assert main(["baseline", "save", str(fx["run_b"]), "--name", "llama8b-h100"]) == 2
    assert "pass --force" in capsys.readouterr().err

    assert main(["baseline", "save", str(fx["sweep"]), "--name", "nightly"]) == 0
    capsys.readouterr()
    assert (root / "nightly" / "index.json").is_file() and (root / "nightly" / "sweep.yaml").is_file()

    assert main(["baseline", "list"]) == 0
    listing = capsys.readouterr().out
    assert (
        "llama8b-h100" in listing
        and "nightly" in listing
        and "engine_config.yaml" in listing
        and "sweep.yaml" in listing
    )

    # compare against the stored baselines: the saved copy is as good as the run itself
    assert main(["compare", "baseline:llama8b-h100", str(fx["run_b"])]) == 0
    out = capsys.readouterr().out
    assert "baseline:llama8b-h100 →" in out and "bootstrap over 200/200 requests" in out
    assert main(["compare", "baseline:llama8b-h100", str(fx["run_slow"])]) == 1
    capsys.readouterr()
    assert main(["compare", "baseline:nightly", str(fx["sweep_same"]), "--metrics", "rps"]) == 0
    capsys.readouterr()

    assert main(["compare", "baseline:missing", str(fx["run_b"])]) == 2
    err = capsys.readouterr().err
    assert "no such baseline (saved ones: llama8b-h100, nightly)" in err


def test_save_refuses_bad_input(fx, tmp_path, capsys):
    root = ["--root", str(tmp_path / "b")]
    assert main(["baseline", "save", str(fx["run_a"]), "--name", "bad name", *root]) == 2
    assert main(["baseline", "save", str(tmp_path / "nope"), "--name", "x", *root]) == 2
    assert main(["baseline", "save", str(fx["crashed"]), "--name", "x", *root]) == 2
    assert "needs a finished run" in capsys.readouterr().err
    assert (
        main(
            ["baseline", "save", str(fx["run_a"]), "--name", "x", "--engine-config", str(tmp_path / "none.yaml"), *root]
        )
        == 2
    )
    assert main(["baseline", *root[:0]]) == 2
    assert main(["baseline", "list", *root]) == 0
    assert "no baselines under" in capsys.readouterr().out


def test_a_saved_baseline_is_not_reported_as_missing_its_time_series(fx, tmp_path, capsys):
    """baseline save keeps no engine_metrics.jsonl/progress.jsonl by design: gh-summary and compare
    against it must not warn that they are missing (a real copy without them still does)."""
    root = ["--root", str(tmp_path / "store")]
    for src, name in ((fx["run_a"], "one"), (fx["sweep"], "many")):
        assert main(["baseline", "save", str(src), "--name", name, *root]) == 0
    capsys.readouterr()
    env_root = ["--baselines", str(tmp_path / "store")]
    main(["compare", "baseline:one", str(fx["run_b"]), *env_root])
    main(["compare", "baseline:many", str(fx["sweep_same"]), *env_root])
    out = capsys.readouterr()
    for name in ("engine_metrics.jsonl", "progress.jsonl"):
        assert f"{name} is missing" not in out.out + out.err
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(fx["run_b"], bare)
    (bare / "engine_metrics.jsonl").unlink()
    from harness.report.data import load_run

    assert any("engine_metrics.jsonl is missing" in n for n in load_run(bare).notes)
    assert not any("is missing" in n for n in load_run(tmp_path / "store" / "one").notes)
