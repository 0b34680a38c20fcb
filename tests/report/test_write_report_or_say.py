"""write_report_or_say: the drivers' report at the end never raises; it says what happened."""

from __future__ import annotations

from pathlib import Path

from harness.report import write_report_or_say


def test_written_or_said_never_raised(tmp_path: Path) -> None:
    said: list[str] = []
    assert write_report_or_say(lambda out: out / "report.html", tmp_path, said.append) == tmp_path / "report.html"

    def broken(out: Path) -> Path:
        raise OSError("disk full")

    assert write_report_or_say(broken, tmp_path, said.append, failed="  note: report not written: {error}") is None
    assert said == [f"report: {tmp_path / 'report.html'}", "  note: report not written: OSError: disk full"]
