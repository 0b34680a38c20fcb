"""--processes N: the load processes' requests.wK.jsonl / progress.wK.jsonl are joined into the run
directory's one file each, block by block (a long run's parts are gigabytes: never read whole)."""

from __future__ import annotations

from harness.results.layout import RunDir
from harness.run import modes
from harness.run.modes import merge_worker_files


def test_parts_join_in_order_and_a_cut_part_still_ends_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(modes, "_COPY_BLOCK", 7)  # many blocks per part
    (tmp_path / "requests.jsonl").write_bytes(b'{"i":0}\n')  # written before (a resumed run)
    (tmp_path / "requests.w0.jsonl").write_bytes(b'{"i":1}\n{"i":2}\n')
    (tmp_path / "requests.w1.jsonl").write_bytes(b'{"i":3}\n{"i":4,"cut')  # a process died mid-line
    (tmp_path / "requests.w2.jsonl").write_bytes(b"")
    (tmp_path / "progress.w0.jsonl").write_bytes(b'{"done":2}\n')
    merge_worker_files(RunDir(tmp_path))
    assert (tmp_path / "requests.jsonl").read_bytes() == b'{"i":0}\n{"i":1}\n{"i":2}\n{"i":3}\n{"i":4,"cut\n'
    assert (tmp_path / "progress.jsonl").read_bytes() == b'{"done":2}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress.jsonl", "requests.jsonl"]
