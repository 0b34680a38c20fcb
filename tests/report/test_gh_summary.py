"""`harness gh-summary` appends Markdown to $GITHUB_STEP_SUMMARY (or prints it)."""

from __future__ import annotations

from harness.cli.main import main


def test_run_summary_with_comparison_appends_to_step_summary(fx, tmp_path, monkeypatch, capsys):
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["gh-summary", str(fx["run_slow"]), "--compare-to", str(fx["run_a"])]) == 0  # summary never gates
    assert "appended the summary" in capsys.readouterr().out
    md = summary.read_text()
    assert md.startswith("earlier step\n")  # appended, not overwritten
    assert "## harness run `chat`" in md
    assert "> ✅ No validity warnings." in md
    assert "| metric | all | short | long |" in md
    assert "Engine: KV cache max" in md
    assert "### ❌ Comparison with the baseline" in md
    assert "| ITL p50 (ms) |" in md and "❌ REGRESSION" in md
    assert "<details><summary>How this was decided</summary>" in md


def test_sweep_summary_and_failed_comparison_input(fx, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert main(["gh-summary", str(fx["sweep"]), "--compare-to", "baseline:none", "--baselines", str(tmp_path)]) == 0
    md = capsys.readouterr().out
    assert "## harness sweep `max-num-seqs`" in md
    assert "config `c3-seqs512` produced no results" in md
    assert md.count("best under the SLOs: **c1-seqs128**") == 2
    assert "| 1 | ★ c1-seqs128 |" in md
    assert "Comparison with the baseline not possible" in md and "no such baseline" in md


def test_warnings_are_listed(fx, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert main(["gh-summary", str(fx["run_warn"])]) == 0
    md = capsys.readouterr().out
    assert "> [!WARNING]" in md and "client CPU saturated" in md
    assert main(["gh-summary", "/nonexistent/dir"]) == 2
