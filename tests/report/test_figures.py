"""Every figure exists, has the expected series (checked on the matplotlib objects before any
rendering), clear labels, and renders to a PNG."""

from __future__ import annotations

from harness.report.build import build_run_report, build_sweep_report
from harness.report.data import load_run
from harness.report.sweep_data import load_sweep

PNG = b"\x89PNG\r\n\x1a\n"


def _labels(ax) -> list[str]:
    return [ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")]


def test_run_figures_have_expected_series(fx):
    doc = build_run_report(load_run(fx["run_a"]))
    figs = doc.figures
    assert set(figs) == {"ttft", "itl", "over_time"}

    ttft = figs["ttft"].figure.axes[0]
    assert [lab.split(" (n=")[0] for lab in _labels(ttft)] == ["all requests", "class short", "class long"]
    assert ttft.get_ylabel() == "time to first token (ms)"
    assert "percentile" in ttft.get_xlabel()
    ticks = [t.get_text() for t in ttft.get_xticklabels()]
    assert "99%" in ticks and "90%" in ticks  # tail stretched: 90/99/... equally spaced
    assert ttft.get_title() == "TTFT percentile distribution"

    itl = figs["itl"].figure.axes[0]
    labels = [lab.split(" (n=")[0] for lab in _labels(itl)]
    assert labels[:3] == ["all requests", "class short", "class long"]
    assert labels[3].startswith("all, per chunk")  # the fixture has 2-token chunks: per chunk differs
    assert "99.9%" in [t.get_text() for t in itl.get_xticklabels()]  # 17k gaps reach the 99.9th

    over = figs["over_time"].figure.axes
    assert [ax.get_title(loc="left") for ax in over] == [
        "KV cache usage",
        "Requests running and waiting in the engine",
        "Preemptions",
        "Throughput",
    ]
    assert _labels(over[0]) == ["KV cache usage"]
    assert _labels(over[1]) == ["running", "waiting", "in flight (client)"]
    assert _labels(over[2]) == ["preemptions/s"]
    assert _labels(over[3]) == [
        "engine output tokens/s",
        "engine prompt tokens/s",
        "client output tokens/s (counted as requests finish)",
    ]
    assert over[0].get_ylabel() == "KV usage (%)" and over[3].get_xlabel() == "time (s)"
    for f in figs.values():
        assert f.png().startswith(PNG)


def test_percentile_curve_stops_at_sample_count(fx):
    doc = build_run_report(load_run(fx["run_a"]))
    ttft = doc.figures["ttft"].figure.axes[0]
    all_line = ttft.get_lines()[0]
    # 200 requests support percentiles up to 1 - 1/200 = 99.5 % (x = log10(200) = 2.3), not 99.99 %
    assert max(all_line.get_xdata()) <= 2.31


def test_single_class_run_has_no_duplicate_class_line(tmp_path):
    from .fabricate import CLASSES, make_run

    run = make_run(tmp_path / "one", n=40, classes=CLASSES[:1])
    doc = build_run_report(load_run(run))
    assert [lab.split(" (n=")[0] for lab in _labels(doc.figures["ttft"].figure.axes[0])] == ["all requests"]


def test_run_without_telemetry_says_so_in_the_plot(fx):
    doc = build_run_report(load_run(fx["run_warn"]))
    over = doc.figures["over_time"].figure.axes
    texts = [t.get_text() for t in over[0].texts]
    assert any("no engine telemetry" in t for t in texts)
    assert _labels(over[3]) == ["client output tokens/s (counted as requests finish)"]


def test_sweep_figures(fx):
    sweep = load_sweep(fx["sweep"])
    doc = build_sweep_report(sweep)
    figs = doc.figures
    assert set(figs) == {"latency_vs_throughput", "goodput"}

    lat = figs["latency_vs_throughput"].figure
    axes = lat.axes
    assert len(axes) == 3 * 2  # TTFT/ITL/E2E × two scenarios
    for ax in axes:
        assert _labels(ax) == ["c0-base", "c1-seqs128", "c2-seqs256"]  # the failed config has no point
        assert ax.get_ylim()[0] == 0 or ax.get_yscale() == "log"
        # the best config is ringed exactly once per panel
        assert sum(1 for ln in ax.get_lines() if ln.get_label() == "_best") == 1
    assert [ax.get_title() for ax in axes[:2]] == ["scenario chat-short", "scenario chat-long"]
    assert axes[0].get_ylabel() == "TTFT (ms)" and axes[-1].get_xlabel() == "output tokens/s"
    legend_texts = [t.get_text() for t in lat.legends[0].get_texts()]
    assert {"c0-base", "p50", "p99", "best under SLO"} <= set(legend_texts)

    good = figs["goodput"].figure.axes[0]
    assert [c.get_label() for c in good.containers] == ["scenario chat-short", "scenario chat-long"]
    assert [t.get_text() for t in good.get_xticklabels()] == ["c0-base", "c1-seqs128", "c2-seqs256", "c3-seqs512"]
    texts = [t.get_text() for t in good.texts]
    assert "failed to start" in texts
    assert sum(t.startswith("★") for t in texts) == 2  # one best per scenario
    assert "goodput" in good.get_ylabel()
    for f in figs.values():
        assert f.png().startswith(PNG)


def _over_time(progress, engine=None):
    from harness.report.figures import over_time_figure

    return over_time_figure(engine or [], progress).axes


def test_client_throughput_has_no_spike_at_the_final_progress_line():
    """Audit D22: the final progress line came 0.2 s after the last periodic one, and the tokens
    counted as the last requests finished drew a spike of several times the real rate."""
    t0 = 1_700_000_000.0
    progress = [{"t": t0 + i, "phase": "measure", "output_tokens": 100 * i, "in_flight": 4} for i in range(20)]
    progress.append({"t": t0 + 19.2, "phase": "done", "output_tokens": 100 * 19 + 60, "in_flight": 0})
    ax = _over_time(progress)[3]
    line = next(ln for ln in ax.get_lines() if ln.get_label().startswith("client output tokens/s"))
    assert max(line.get_ydata()) < 150  # steady 100 tok/s; the old sliver rate was 300


def test_throughput_legend_does_not_cover_the_panel_title():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    t0 = 1_700_000_000.0
    progress = [{"t": t0 + i, "phase": "measure", "output_tokens": 100 * i, "in_flight": 4} for i in range(10)]
    engine = [{"t": t0 + i, "generation_tokens_total": 90.0 * i, "prompt_tokens_total": 900.0 * i} for i in range(10)]
    axes = _over_time(progress, engine)
    fig = axes[3].figure
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    title = axes[3].title if axes[3].title.get_text() else axes[3]._left_title
    legend = axes[3].get_legend()
    assert title.get_text() == "Throughput"
    assert not title.get_window_extent(renderer).overlaps(legend.get_window_extent(renderer))


def test_latency_throughput_legend_fits_a_one_scenario_figure():
    """Audit D12: with one scenario the legend row was wider than the figure ('-seqs=8')."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from harness.report.figures import SweepPoint, latency_throughput_figure

    configs = [f"max-num-seqs={n}" for n in (8, 32, 128, 256)]
    pts = [
        SweepPoint(
            config=c,
            scenario="chat",
            throughput=100.0 * (i + 1),
            lat={m: (10.0 * (i + 1), 30.0 * (i + 1)) for m in ("ttft", "itl", "e2e")},
            goodput_rps=1.0,
            goodput_fraction=1.0,
            repeats=1,
            group="chat",
            level=None,
        )
        for i, c in enumerate(configs)
    ]
    fig = latency_throughput_figure(pts, configs, ["chat"], {"chat": configs[0]})
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    box = fig.legends[0].get_window_extent(canvas.get_renderer())
    width = fig.get_figwidth() * fig.dpi
    assert box.x0 >= 0 and box.x1 <= width, (box, width)


def test_a_long_missing_telemetry_reason_does_not_collapse_the_layout() -> None:
    """A run whose engine died before the window (no request completed): the over-time figure's
    note carried the whole connection error, constrained layout squeezed the axes to zero and
    matplotlib printed a UserWarning on the console even with --quiet."""
    import io
    import warnings

    from harness.report.figures import over_time_figure
    from harness.results.models.summary import Window

    reason = (
        "http://127.0.0.1:39197/metrics unreachable (\"HTTPConnection(host='127.0.0.1', port=39197): Failed to "
        'establish a new connection: [Errno 111] Connection refused")'
    )
    progress = [{"t": 100.0 + i, "phase": "warmup", "in_flight": 0, "done": 0, "output_tokens": 0} for i in range(3)]
    fig = over_time_figure([], progress, Window(), reason)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig.savefig(io.BytesIO(), format="png", dpi=100)
    assert all(ax.get_position().height > 0.05 for ax in fig.axes)


def test_the_itl_axis_shows_the_band_where_the_gaps_are():
    """Audit N19: zero gaps of coalesced reads (stored as 1 us) took the log axis down to 1e-3 ms
    and squeezed the 5-200 ms band into its top third. The axis starts at the decade of the lowest
    curve's 10th percentile."""
    import numpy as np

    from harness.report import figures as F
    from harness.results import hdr

    rng = np.random.default_rng(0)
    gaps_ms = np.concatenate([np.full(300, 0.001), rng.lognormal(np.log(20), 0.6, 9700), [400.0, 900.0]])
    fig = F.percentile_figure(
        [F.Series("all requests", hdr.from_values(gaps_ms * 1e6))], "ITL", "inter-token latency (ms)"
    )
    ax = fig.axes[0]
    bottom, top = ax.get_ylim()
    assert ax.get_yscale() == "log"
    assert 0.5 <= bottom <= 5.0 and top >= 400.0, (bottom, top)  # the 1-1000 ms band, not 1e-3
