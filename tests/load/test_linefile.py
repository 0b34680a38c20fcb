"""A JSON-lines file on a full disk ends on a whole line, says why, and writes nothing more (audit R5)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from harness.load import linefile
from harness.load.linefile import LineFile


def test_a_flush_cut_short_by_a_full_disk_keeps_only_whole_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "requests.jsonl"
    f = LineFile(path, 1 << 16)
    for i in range(3):
        assert f.write(f'{{"i":{i},"pad":"{"x" * 40}"}}\n')
    f.flush()
    whole = path.read_bytes()
    room = [70]  # the disk takes 70 more bytes, then it is full: the fifth line is torn

    def full_disk(fd: int, data: memoryview) -> int:
        if room[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = real_write(fd, data[: room[0]])
        room[0] -= n
        return n

    real_write = os.write
    monkeypatch.setattr(linefile.os, "write", full_disk)
    for i in range(3, 6):
        f.write(f'{{"i":{i},"pad":"{"x" * 40}"}}\n')
    f.flush()
    assert f.error is not None and f.error.errno == errno.ENOSPC
    text = path.read_bytes()
    assert text.endswith(b"\n") and text.startswith(whole) and len(text.splitlines()) == 4  # one of three fitted
    assert f.write('{"i":6}\n') is False and f.dropped == 4  # the 3 of the failed flush, then this one
    f.close()
    assert path.read_bytes() == text


def test_on_dev_full_nothing_is_written_and_the_error_is_kept(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    f = LineFile(Path("/dev/full"), 1)
    assert f.write("{}\n") is False and f.error is not None and f.error.errno == errno.ENOSPC
    f.close()
