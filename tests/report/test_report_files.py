"""report.md / report.html for runs, sweeps and crashed runs; the `harness report` command."""

from __future__ import annotations

import re
import shutil

from harness.cli.main import main
from harness.report import write_report

RECORD_LIST = (
    "TTFT",
    "ITL per token",
    "E2E latency",
    "Requests/s",
    "Input tokens/s",
    "Output tokens/s",
    "GPU memory",
    "KV cache occupancy",
    "Preemptions",
    "Prefix cache hit rate",
)


def _copy(src, tmp_path):
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def test_run_report_md_and_html(fx, tmp_path):
    run = _copy(fx["run_a"], tmp_path)
    path = write_report(run)
    assert path == run / "report.html"
    md = (run / "report.md").read_text()
    html = path.read_text()
    for item in RECORD_LIST:
        assert item in md, item
        assert item in html, item
    # per class and overall columns
    assert "| Metric | all requests | short | long |" in md
    assert "No validity warnings" in md
    for name in ("ttft", "itl", "over_time"):
        assert (run / "report_files" / f"{name}.png").stat().st_size > 5000
        assert f"report_files/{name}.png" in md
    # self-contained HTML: every image inline, nothing fetched from elsewhere
    srcs = re.findall(r'src="([^"]+)"', html)
    assert len(srcs) == 3 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "<link" not in html and "<script" not in html and "http://" not in html.split("<body>")[0]
    assert "71.5 GiB of 80.0 GiB" in md  # GPU memory
    assert "30.0 % (workload allows 32.0 %)" in md  # prefix cache


def test_validity_warnings_come_first(fx, tmp_path):
    run = _copy(fx["run_warn"], tmp_path)
    write_report(run)
    md = (run / "report.md").read_text()
    warn = md.index("Validity warnings")
    assert warn < md.index("## Record list")
    head = md[warn : md.index("## Record list")]
    assert "client CPU saturated" in head
    assert "engine telemetry missing: connection refused at /metrics" in head
    assert "Failed requests by kind" in md and "http_503" in md
    assert "GPU memory used (max) | not available" in md


def test_crashed_run_degrades_and_says_what_is_missing(fx, tmp_path):
    run = _copy(fx["crashed"], tmp_path)
    write_report(run)
    md = (run / "report.md").read_text()
    head = md[: md.index("## Record list")]
    assert "summary.json is missing" in head
    assert "histograms.json is missing" in head
    assert "engine_metrics.jsonl is missing" in head
    assert "unreadable line(s) skipped" in head
    assert "TTFT p50 (ms)" in md  # computed from requests.jsonl
    assert (run / "report_files" / "ttft.png").is_file()  # from per-request values
    assert not (run / "report_files" / "itl.png").exists()  # no gaps without histograms


def test_sweep_report(fx, tmp_path):
    out = tmp_path / "out"
    path = write_report(fx["sweep"], out)
    md = (out / "report.md").read_text()
    assert path == out / "report.html"
    assert md.index("Validity warnings") < md.index("## Ranking per scenario")
    assert "config `c3-seqs512` (--max-num-seqs 512) produced no results: engine exited during startup" in md
    assert "- scenario `chat-short`: **c1-seqs128**" in md  # the fastest config wins
    assert "★ **c1-seqs128**" in md
    assert "FAILED: engine exited during startup" in md
    assert md.count("configs ranked by goodput") == 2
    for name in ("latency_vs_throughput", "goodput"):
        assert (out / "report_files" / f"{name}.png").is_file()
    assert (out / "report.html").read_text().count("data:image/png;base64,") == 2


def test_cli_report(fx, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["report", str(fx["run_b"]), "--out", str(out), "--format", "md"]) == 0
    assert (out / "report.md").is_file() and not (out / "report.html").exists()
    assert "wrote" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["report", str(fx["run_b"]), "--format", "pdf", "--out", str(out)]) == 2
    assert "choose one of: html, md" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert "neither a run directory" in capsys.readouterr().err


def test_writers_are_registered_behind_the_protocol():
    from harness.report.document import Document, Paragraph, Table
    from harness.report.writers import WRITERS

    assert WRITERS.names() == ["html", "md"]
    doc = Document("T", blocks=[Paragraph("a `code` and **bold** | pipe"), Table(["x", "y"], [["1|2", "3"]])])
    from harness.report.writers.html import render as html_render
    from harness.report.writers.markdown import render as md_render

    h = html_render(doc)
    assert "<code>code</code>" in h and "<strong>bold</strong>" in h
    assert "| 1\\|2 | 3 |" in md_render(doc)


def test_sweep_warning_shared_by_many_cells_is_one_line(tmp_path):
    """A warning every cell has (an engine without /metrics, a chat template's extra tokens) is one
    line naming how many cells, not one line per cell; a warning of one cell names that cell."""
    from harness.report.build import build_sweep_report
    from harness.report.sweep_data import load_sweep

    from .fabricate import make_sweep

    everywhere = "engine telemetry missing: the engine exposes no /metrics"
    ids = [f"{cfg}__{sc}__r0" for cfg in ("c0-base", "c1-seqs128", "c2-seqs256") for sc in ("chat-short", "chat-long")]
    warnings = {cid: (everywhere,) for cid in ids}
    warnings[ids[0]] = (everywhere, "client CPU at 97%: numbers not trustworthy")
    warnings[ids[1]] = (everywhere, "2 requests still in flight at the end")
    warnings[ids[3]] = (everywhere, "2 requests still in flight at the end")
    doc = build_sweep_report(load_sweep(make_sweep(tmp_path / "s", n=40, warnings=warnings)))
    callout = next(b for b in doc.blocks if type(b).__name__ == "Callout")
    items = callout.items
    assert f"every cell (6): {everywhere}" in items
    assert "c0-base × chat-short (repeat 0): client CPU at 97%: numbers not trustworthy" in items
    assert (
        "2 cells (c0-base × chat-long (repeat 0), c1-seqs128 × chat-long (repeat 0)): 2 requests still in flight at the end"
        in items
    )
    assert sum(everywhere in i for i in items) == 1


def _set_cells(sweep_dir, fn) -> None:
    import json

    for summary_path in (sweep_dir / "runs").glob("*/summary.json"):
        data = json.loads(summary_path.read_text())
        fn(summary_path.parent.name, data)
        summary_path.write_text(json.dumps(data))


def test_sweep_report_does_not_crown_a_config_that_carried_another_load(tmp_path):
    """Audit D3: vary.link gave each config its own client concurrency; the report crowned the one
    with 16x the users, with no load column. Now every row shows its load and none is crowned."""
    from .fabricate import make_sweep

    sweep = make_sweep(tmp_path / "sw", scenarios=("chat",), failed_config=None)
    users = {"c0-base": 8, "c1-seqs128": 32, "c2-seqs256": 128}
    _set_cells(sweep, lambda cell, d: d["load"].update(concurrency=users[cell.split("__")[0]]))
    out = tmp_path / "out"
    write_report(sweep, out)
    md = (out / "report.md").read_text()
    assert "- scenario `chat`: none chosen: the configs ran at different client loads" in md
    assert "★ **" not in md
    assert "Not ranked: the configs ran at different client loads" in md
    assert "| 128 users |" in md and "| 8 users |" in md
    html = (out / "report.html").read_text()
    assert "<li>scenario <code>chat</code>: none chosen" in html  # a list, not literal "- " markers (D12)


def test_sweep_report_shows_gpu_memory_and_false_flags_as_argv_spells_them(tmp_path):
    """Audit D7 (GPU memory only in each cell's summary.json) and D12 (`--cb-use-cuda-graph False`
    where argv was `--no-cb-use-cuda-graph`)."""
    import json

    from .fabricate import make_sweep

    sweep = make_sweep(tmp_path / "sw", scenarios=("chat",), failed_config=None)
    _set_cells(
        sweep,
        lambda cell, d: d["engine"].update(
            gpu_memory={"available": True, "used_max_bytes": 30 * 2**30, "total_bytes": 80 * 2**30}
        ),
    )
    index = json.loads((sweep / "index.json").read_text())
    for c in index["cells"]:
        c["flags"] = {**c["flags"], "cb-use-cuda-graph": False}
    (sweep / "index.json").write_text(json.dumps(index))
    out = tmp_path / "out"
    write_report(sweep, out)
    md = (out / "report.md").read_text()
    assert "GPU mem (GiB)" in md and "| 30.0 |" in md
    assert "cb-use-cuda-graph False" not in md and "--no-cb-use-cuda-graph" in md
    assert "- scenario `chat`: **c1-seqs128** (--max-num-seqs 128, 8 users)" in md


def test_html_tables_scroll_inside_their_own_box(fx, tmp_path):
    """Audit D12: the sweep report's cells table was wider than the page. Every table sits in a
    box that scrolls sideways on its own (tests/report/test_report_browser.py measures it in Chromium)."""
    from html.parser import HTMLParser

    out = tmp_path / "out"
    write_report(fx["sweep"], out)
    text = (out / "report.html").read_text()

    class Parents(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack, self.tables = [], []

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append(self.stack[-1] if self.stack else None)
            self.stack.append((tag, dict(attrs).get("class")))

        def handle_endtag(self, tag):
            while self.stack and self.stack.pop()[0] != tag:
                pass

    parser = Parents()
    parser.feed(text)
    assert len(parser.tables) >= 3 and all(p == ("div", "tablewrap") for p in parser.tables), parser.tables
    assert re.search(r"\.tablewrap\{[^}]*overflow-x:auto", text)


def test_a_finished_runs_report_reads_no_per_request_records(fx, tmp_path):
    # every figure of a finished run's report is in summary.json and histograms.json: the records
    # (5 GB as dicts for a 360,000-request run) stay on disk; a crashed run's are read (its summary)
    from harness.report.data import load_run

    run = _copy(fx["run_a"], tmp_path)
    assert (run / "requests.jsonl").stat().st_size > 0
    assert load_run(run, requests=None).requests is None
    assert load_run(run).requests  # compare and baselines still read them
    assert load_run(_copy(fx["crashed"], tmp_path), requests=None).requests
