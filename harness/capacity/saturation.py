"""Early stop of an over-saturated trial: the load offered is more than the target carries.

An open-loop trial above the target's capacity only gets worse the longer it runs: requests
queue, in-flight grows without bound and every TTFT is longer than the one before. Running such
a trial to the end of its window wastes minutes and teaches nothing the first seconds did not.

The test follows GuideLLM's over-saturation detector: a least-squares slope of in-flight
requests over time and of TTFT over send time, each counted as rising only when the slope is
positive and its margin of error (t-distribution, 95%) is below `moe_threshold` times the
slope. A trial is saturated when in-flight is rising (requests due so far by the
arrival schedule, less those done) AND either completions fall short of the
offered rate (achieved below offered by `shortfall`, beyond the fit's margin of error) or TTFT
is rising. Nothing is judged
before `min_duration_s` and `min_points` samples, and the in-flight and completion fits leave out
the fill-up: the first median end-to-end latency of the window (at most half the time elapsed),
while in-flight climbs from zero to rate x latency (Little's law) in any stable system. Fitting
through it read a real vLLM on an H100 at 4 req/s of chat (1.3 s per request, 100% within the
SLOs, in-flight 4-5 from the second second on) as "in-flight grew 0.50/s (±0.47), completions
3.50/s of 4/s": every trial stopped early and capacity came out at 2 req/s.

Closed loop cannot over-saturate (in-flight is capped at the user count), so the detector only
watches open-loop trials. It is fed the load processes' progress lines (one a second per
process) and reads TTFTs from the run directory's requests files as they are flushed.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: two-sided 97.5% quantiles of Student's t by degrees of freedom (1..30); normal beyond
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t_975(dof: int) -> float:
    if dof < 1:
        return math.inf
    return _T975[dof - 1] if dof <= len(_T975) else 1.96 + 2.4 / dof


@dataclass(frozen=True)
class Slope:
    """Least-squares slope of y over x, with its 95% margin of error."""

    slope: float
    moe: float  # half-width of the 95% confidence interval of the slope
    n: int

    def rising(self, moe_threshold: float) -> bool:
        """Positive, and the margin of error small against the slope (GuideLLM's test)."""
        return self.slope > 0 and self.moe < moe_threshold * self.slope


def fit_slope(xs: list[float], ys: list[float], effective_n: float | None = None) -> Slope | None:
    """None with fewer than 3 points or no spread in x. `effective_n` caps the degrees of freedom
    (many TTFTs sent in one second are correlated; GuideLLM caps n at the elapsed seconds)."""
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    slope = sxy / sxx
    n_eff = min(float(n), effective_n) if effective_n is not None else float(n)
    dof = max(1, int(n_eff) - 2)
    rss = max(0.0, syy - slope * sxy)
    # the residual variance from all points, the standard error from the effective count
    se = math.sqrt(rss / max(1, n - 2) / sxx) * math.sqrt(max(1.0, (n - 2) / dof))
    return Slope(slope=slope, moe=t_975(dof) * se, n=n)


@dataclass
class SaturationDetector:
    """Call `observe(progress_lines)` with the latest progress line of every load process; it
    returns a one-line reason once the trial is over-saturated, else None.

    `offered_rps`: the trial's open-loop rate (None: closed loop, never judged saturated).
    `run_dir`: where requests*.jsonl appear (TTFT trend); None: in-flight and rate only.
    """

    offered_rps: float | None
    run_dir: Path | None = None
    min_duration_s: float = 5.0
    min_points: int = 5
    moe_threshold: float = 1.0
    shortfall: float = 0.10  # achieved below (1 - shortfall) x offered counts as falling short
    max_window_s: float = 120.0
    arrivals_end_s: float | None = None  # the window's duration: after it no request is due
    samples: deque[tuple[float, int, int]] = field(default_factory=deque)  # (elapsed, due - done, done)
    ttfts: deque[tuple[float, float]] = field(default_factory=deque)  # (sent s, ttft ms)
    e2es_ms: list[float] = field(default_factory=list)  # end-to-end latencies of the window's completed requests
    _offsets: dict[Path, int] = field(default_factory=dict)
    _t0_ns: int | None = None
    last: dict[str, Any] = field(default_factory=dict)

    def observe(self, lines: list[dict[str, Any]]) -> str | None:
        if self.offered_rps is None or not lines:
            return None
        if any(ln.get("phase") not in ("measure", "drain") for ln in lines):
            return None  # warmup (or done): not the measured window
        elapsed = max(float(ln.get("elapsed_s") or 0.0) for ln in lines)
        if self.arrivals_end_s is not None and elapsed > self.arrivals_end_s:
            return None  # no more arrivals: the backlog only shrinks from here
        # handed out so far: sent, plus (open loop) scheduled ahead of their send times
        sent = sum(int(ln.get("sent") or 0) + int(ln.get("scheduled") or 0) for ln in lines)
        done = sum(int(ln.get("done") or 0) + int(ln.get("failed") or 0) for ln in lines)
        # requests in the system: those due so far by the arrival schedule, less those done (sent
        # late or not, a due request is load the target has not carried yet)
        due = min(sent, int(self.offered_rps * elapsed))
        self.samples.append((elapsed, max(0, due - done), done))
        while self.samples and elapsed - self.samples[0][0] > self.max_window_s:
            self.samples.popleft()
        self._read_ttfts()
        return self.judge()

    def judge(self) -> str | None:
        if not self.samples:
            return None
        elapsed = self.samples[-1][0]
        if elapsed < self.min_duration_s or len(self.samples) < self.min_points:
            return None
        fill_s = self.fill_s(elapsed)
        if fill_s is None:
            return None
        steady = [s for s in self.samples if s[0] >= fill_s]
        if len(steady) < min(3, self.min_points):
            return None
        xs = [s[0] for s in steady]
        flight = fit_slope(xs, [float(s[1]) for s in steady])
        completions = fit_slope(xs, [float(s[2]) for s in steady])
        ttft = None
        if len(self.ttfts) >= self.min_points:
            tx = [t[0] for t in self.ttfts]
            ttft = fit_slope(tx, [t[1] for t in self.ttfts], effective_n=max(3.0, max(tx) - min(tx)))
        self.last = {
            "elapsed_s": elapsed,
            "fill_s": fill_s,
            "in_flight_slope": flight.slope if flight else None,
            "achieved_rps": completions.slope if completions else None,
            "ttft_slope_ms_per_s": ttft.slope if ttft else None,
        }
        if flight is None or not flight.rising(self.moe_threshold):
            return None
        assert self.offered_rps is not None
        # short beyond the fit's own margin: a dozen completions in six seconds of a stable
        # target read 1.83/s of 2.18/s offered on a real vLLM (TTFT flat at 25 ms)
        short = (
            completions is not None and completions.slope + completions.moe < (1.0 - self.shortfall) * self.offered_rps
        )
        ttft_up = ttft is not None and ttft.rising(self.moe_threshold)
        if not (short or ttft_up):
            return None
        parts = [f"in-flight grew {flight.slope:.2f}/s (±{flight.moe:.2f})"]
        if completions is not None:
            parts.append(f"completions {completions.slope:.2f}/s of {self.offered_rps:g}/s offered")
        if ttft is not None:
            parts.append(f"TTFT {'+' if ttft.slope >= 0 else ''}{ttft.slope:.0f} ms per s (±{ttft.moe:.0f})")
        return f"over-saturated after {elapsed:.1f} s: " + ", ".join(parts)

    def fill_s(self, elapsed: float) -> float | None:
        """How long in-flight takes to fill up at the start of the window: the median end-to-end
        latency of the requests completed so far, at most half the time elapsed (a saturated
        target's latencies grow with the queue; the later half is always judged). Without a
        requests file (progress lines only) nothing is left out; with one but no completion yet,
        None: nothing is judged, since in-flight rising with nothing done is also what a stable
        target with requests longer than the time elapsed shows (a 64 req/s trial was called
        over-saturated after 4 s "in-flight grew 64.00/s, completions 0.00/s")."""
        if self.run_dir is None:
            return 0.0
        if not self.e2es_ms:
            return None
        return min(statistics.median(self.e2es_ms) / 1000.0, elapsed / 2)

    def _read_ttfts(self) -> None:
        """New complete lines of requests*.jsonl since the last call (the load process flushes
        them with each progress line)."""
        if self.run_dir is None:
            return
        for path in sorted(self.run_dir.glob("requests*.jsonl")):
            offset = self._offsets.get(path, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            end = data.rfind(b"\n")
            if end < 0:
                continue
            self._offsets[path] = offset + end + 1
            for raw in data[: end + 1].splitlines():
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue
                sent = rec.get("intended_ns") or rec.get("sent_ns")
                if rec.get("warmup"):
                    continue
                if rec.get("e2e_ms") is not None:
                    self.e2es_ms.append(float(rec["e2e_ms"]))
                if rec.get("ttft_ms") is None or not sent:
                    continue
                if self._t0_ns is None:
                    self._t0_ns = sent
                self.ttfts.append(((sent - self._t0_ns) / 1e9, float(rec["ttft_ms"])))
        if self.ttfts:
            newest = max(t[0] for t in self.ttfts)
            while self.ttfts and newest - self.ttfts[0][0] > self.max_window_s:
                self.ttfts.popleft()
