"""capacity's numeric flags: NaN and infinity are one line, exit 2, before anything starts (audit R9:
--start nan|inf ended in an internal error, exit 70; --precision nan ran every trial and exited 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "flag, value, says",
    [
        ("--start", "nan", "--start nan: a finite number above 0"),
        ("--start", "inf", "--start inf: a finite number above 0"),
        ("--precision", "nan", "--precision nan: a fraction between 0 and 1"),
        ("--max-level", "inf", "--max-level inf: a finite number above 0"),
        ("--duration", "inf", "--duration inf: a finite number above 0"),
        ("--warmup", "nan", "--warmup nan: a finite number of seconds"),
    ],
)
def test_non_finite_numbers_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, says: str
) -> None:
    out = tmp_path / "out"
    rc = main(["capacity", str(ROOT / "scenarios" / "capacity_search.yaml"), flag, value, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and says in err[0], err
    assert not out.exists()
