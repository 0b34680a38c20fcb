"""`harness run` against a server that misbehaves in each of the audit's 47 ways.

The reliability audit of f79ef64 (shared/audits/2026-12-01/reliability.md, group 2) ran
`harness run g2.yaml` (2 users, 3-s window) against `badserver.py MODE` for 47 modes: four junk
event shapes crashed the load process and lost the run, six stalls held a 3-s run for up to the
600-s request timeout, and error storms ran unthrottled. Each mode is a row here; every row must
end the way a user can rely on:

- the run ends on time: the measured window closes at its duration plus the drain deadline
  (in-flight requests are then cut and counted), and the whole command within a bound far below
  the old 600-s hang;
- the exit code says whether it went well (0) or badly (1), never 2/70 or a signal;
- the failure is counted under the right error kind in summary.json;
- the results are kept: summary.json and requests.jsonl parse, requests.jsonl holds no more
  lines than requests counted;
- no traceback and no "internal error" anywhere on the console.

The server is vendored (tests/load/badserver.py). The first POST gets a good stream so the
preflight probe passes and the load phase meets the fault (the audit's default). The runs are
independent processes, so the module runs them a few at a time in parallel (the selected rows
only) and each row then checks its own run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("badserver.py")
DURATION_S = 2.0
DRAIN_MAX_S = 10.0  # harness/load/deadlines.py: max(MIN_DRAIN_S, 2 x duration) for a short window
#: a hang guard, not a figure: half the old 600-s request-timeout hang. That the run ends on time is
#: the window's own figures (closed at the drain deadline, in-flight requests cut), which a busy
#: host does not stretch; the command's wall time is the host's (99 s for a 2-s run at load 14)
HANG_S = 300.0
#: runs at once: a stalled mode's run mostly waits out its drain deadline (~12 s idle of ~14 s),
#: so those start first and the quick modes (~3 s each) share the other slots meanwhile
PARALLEL = 6

SCENARIO = f"""\
name: g2
seed: 1
load: {{concurrency: 2, duration_s: {DURATION_S}}}
workload:
  classes:
    - {{name: a, input_tokens: 16, output_tokens: 8}}
"""


@dataclass(frozen=True)
class Expect:
    rc: int  # 0: the run went well; 1: it went badly and says so
    kinds: tuple[str, ...] = ()  # error kinds that must be counted (each of them)
    done: bool = True  # some requests completed (False: none may)
    # megabytes per response: on a loaded box a request may still be in flight at the drain
    # deadline (then cut, which is the contract too), and the cut may land a few seconds late
    heavy: bool = False


OK = Expect(0)
MODES: dict[str, Expect] = {
    # well-formed or tolerable variations of the protocol: measured like a good server
    "ok": OK,
    "malformed_sse": OK,  # non-data lines, comments, retry: ignored as the SSE spec says
    "chunk_split": OK,
    "chunk_ext": OK,
    "chunk_multi_event": OK,
    "chunk_mid_event": OK,
    "huge_chunk": Expect(0, heavy=True),
    "long_line_10mb": Expect(0, heavy=True),
    "data_nospace": OK,
    "crlf": OK,
    "cr_only": OK,  # the audit's defect 18: CR-only line ends are valid SSE
    "no_done_with_finish": OK,
    "no_usage": OK,
    "http10_close": OK,
    # broken events: counted as malformed, the run completes (audit defect 1: four crashed it)
    "invalid_json": Expect(1, ("malformed",), done=False),
    "json_not_object": Expect(1, ("malformed",), done=False),
    "junk_usage": Expect(1, ("malformed",), done=False),
    "junk_usage_str_tokens": Expect(1, ("malformed",), done=False),
    "junk_choices": Expect(1, ("malformed",), done=False),
    "junk_content_type": Expect(1, ("malformed",), done=False),
    "bad_chunk_size": Expect(1, ("malformed",), done=False),
    "bad_status_line": Expect(1, ("malformed",), done=False),
    "garbage_response": Expect(1, ("malformed",), done=False),
    "huge_headers": Expect(1, done=False),
    # streams that never end or stall: the window closes on time, then they are cut (defect 2)
    "never_ends": Expect(1, ("cut",), done=False),
    "stall_after_3": Expect(1, ("cut",), done=False),
    "stall_head": Expect(1, ("cut",), done=False),
    "stall_before_head": Expect(1, ("cut",), done=False),
    "cl_stall": Expect(1, ("cut",), done=False),
    "slow_drip": Expect(1, ("cut",), done=False),  # 30 s per request: longer than the drain
    "endless_no_newline": Expect(1, done=False, heavy=True),  # defect 17: no unbounded line, no overrun
    "stall_some": Expect(0, ("cut",)),  # every 5th stalls: the good ones measured, the share failed a warning
    # the connection breaks mid-stream
    "reset_mid": Expect(1, ("disconnect",), done=False),
    "close_mid": Expect(1, ("disconnect",), done=False),
    "cl_mismatch": Expect(1, ("disconnect",), done=False),
    # HTTP errors (with back-off, defect 13)
    "http429": Expect(1, ("http_429",), done=False),
    "http429_body": Expect(1, ("http_429",), done=False),
    "http500": Expect(1, ("http_5xx",), done=False),
    "http500_body": Expect(1, ("http_5xx",), done=False),
    "http503": Expect(1, ("http_5xx",), done=False),
    "http503_body": Expect(1, ("http_5xx",), done=False),
    "error_event": Expect(1, ("server_error",), done=False),
    # a 200 that is not a stream
    "ok200_nobody": Expect(1, ("incomplete",), done=False),
    "ok200_close_nobody": Expect(1, ("incomplete",), done=False),
    "ok200_json_nonstream": Expect(1, ("incomplete",), done=False),
    "gzip": Expect(1, ("incomplete",), done=False),
    "no_done": Expect(1, ("incomplete",), done=False),
}


@dataclass
class Outcome:
    mode: str
    rc: int | None
    wall_s: float
    out: str
    err: str
    run_dir: Path


def _start_server(mode: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), mode, "--good-first", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "PORT n", printed once listening
    if not line.startswith("PORT"):
        proc.kill()
        raise RuntimeError(f"badserver {mode} did not start: {line!r}")
    return proc, int(line.split()[1])


def _run_mode(mode: str, root: Path) -> Outcome:
    scenario = root / "g2.yaml"
    run_dir = root / mode
    server, port = _start_server(mode)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "run",
                str(scenario),
                "--target",
                f"http://127.0.0.1:{port}",
                "--out",
                str(run_dir),
                "--quiet",
                "--no-report",
            ],
            capture_output=True,
            text=True,
            timeout=HANG_S,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = None, str(exc.stdout or ""), str(exc.stderr or "")
    finally:
        server.kill()
        server.wait()
    return Outcome(mode, rc, time.monotonic() - t0, out, err, run_dir)


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Runs every selected mode once, PARALLEL at a time."""
    selected = [
        it.callspec.params["mode"]
        for it in request.session.items
        if it.module is request.module and hasattr(it, "callspec") and "mode" in it.callspec.params
    ]
    root = tmp_path_factory.mktemp("badserver")
    (root / "g2.yaml").write_text(SCENARIO)
    # the ones held to the drain deadline first (sorted is stable: the rest keep the table's order)
    order = sorted(dict.fromkeys(selected), key=lambda m: not _waits_out_the_drain(MODES[m]))
    with ThreadPoolExecutor(PARALLEL) as pool:
        return {o.mode: o for o in pool.map(lambda m: _run_mode(m, root), order)}


def _waits_out_the_drain(want: Expect) -> bool:
    return "cut" in want.kinds or want.heavy


def test_every_audit_mode_is_a_row():
    source = SERVER.read_text()
    audit_modes = {m for m in MODES}
    assert len(audit_modes) == 47
    for mode in audit_modes:
        assert f'"{mode}"' in source or mode.startswith("http"), mode


#: run in the default suite: one per kind of fault (a junk event, a never-ending and a silent stream,
#: partial stalls, resets, an error storm, a non-stream, and the non-HTTP answers); the others run
#: with `-m slow` (47 runs of ~2.5 CPU-s each). The parsing of every junk shape, CR-only line ends, a
#: bad status line and a stream without [DONE] is also checked without a run, in tests/client
#: (test_malformed_json: junk_usage, junk_choices; test_missing_done_is_incomplete: no_done;
#: test_cr_only_line_endings_parse, test_malformed_framing); invalid_json and ok200_json_nonstream
#: keep the run-level 'malformed' and 'incomplete' rows in the default suite
DEFAULT = {
    "ok",
    "invalid_json",
    "never_ends",
    "stall_before_head",
    "stall_some",
    "reset_mid",
    "http429",
    "ok200_json_nonstream",
    "garbage_response",
    "huge_headers",
}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", [m if m in DEFAULT else pytest.param(m, marks=pytest.mark.slow) for m in MODES])
def test_mode(mode: str, outcomes: dict[str, Outcome]) -> None:
    o, want = outcomes[mode], MODES[mode]
    console = o.out + o.err
    where = f"{mode}: rc {o.rc} after {o.wall_s:.1f}s\n{console[-3000:]}"
    # ends on time, with the right exit code, without a traceback
    assert o.rc is not None, f"hung: did not finish within {HANG_S:.0f}s: {where}"
    assert "Traceback" not in console and "internal error" not in console, where
    summary = json.loads((o.run_dir / "summary.json").read_text())
    req = summary["requests"]
    if want.heavy and o.rc == 1 and want.rc == 0 and set(req["errors_by_kind"]) == {"cut"}:
        want = Expect(1, ("cut",), done=req["completed"] > 0, heavy=True)  # still in flight at the drain deadline
    assert o.rc == want.rc, where
    # the results are kept and readable; the window closed at the drain deadline
    window = summary["window"]
    assert window["duration_s"] <= DURATION_S + DRAIN_MAX_S + (10.0 if want.heavy else 3.0), (window, where)
    lines = (o.run_dir / "requests.jsonl").read_text().splitlines()
    records = [json.loads(ln) for ln in lines]  # every line parses
    assert len(records) <= req["completed"] + req["failed"], where
    # the failure is counted under its kind
    for kind in want.kinds:
        assert req["errors_by_kind"].get(kind, 0) > 0, (req, where)
    if want.done:
        assert req["completed"] > 0, (req, where)
    else:
        assert req["completed"] == 0, (req, where)
    if want.rc == 0:
        assert summary["status"] == "complete", (req, where)
        if not want.kinds:
            assert req["failed"] == 0, (req, where)
        else:  # some failed: the run is complete but flagged
            assert summary["validity"]["ok"] is False and any("failed" in w for w in summary["validity"]["warnings"]), (
                where
            )
    else:
        # a bad run says so: an error line on the console naming what went wrong
        assert "error:" in o.err, where
