"""Offline throughput runs (`load.offline`, `harness run --offline`): the batch figures and the
check that the client was not the limit.

Every measured request is submitted at once and the engine drains them at its own pace, as
`vllm bench throughput` times one `generate()` over all prompts, but through the server. The
figure is the makespan (first send to last completion, which is the measured window) and the
rates over it: requests/s, input and output tokens/s. Per-token latencies are still recorded,
but labelled offline: with N requests queued at once they measure the queue, not the engine's
interactive latency.

The client is the limit when the requests did not all reach the wire together: fewer than 90%
were in flight at one instant (requests finished before the last ones went out), or the last
send trailed the first by more than a fifth of the makespan (a process that cannot open that
many streams quickly enough, a low open-file limit, a saturated event loop). A short spread
with every request in flight is harmless: the engine admits them over its first steps anyway.
Either case is a validity warning naming the numbers and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.results.models.summary import OfflineFacts, RunSummary

#: the last send may trail the first by this share of the makespan before the client counts as the limit
SUBMIT_SHARE_LIMIT = 0.2
#: ... and by at least this many seconds (a short makespan on a busy box)
SUBMIT_FLOOR_S = 0.25
LATENCY_LABEL = "offline: all requests queued at once, so latencies measure the queue"


def _measured(requests_path: Path) -> list[tuple[int, float, int, int]]:
    """(send time ns, e2e ms, input tokens, output tokens) of every measured request that was sent."""
    out = []
    try:
        with open(requests_path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("warmup") or r.get("sent_ns") is None:
                    continue
                ok = r.get("error") is None
                out.append(
                    (
                        int(r["sent_ns"]),
                        float(r.get("e2e_ms") or 0.0),
                        int((ok and r.get("input_tokens")) or 0),
                        int((ok and r.get("output_tokens")) or 0),
                    )
                )
    except OSError:
        return []
    return out


def peak_in_flight(sends: list[tuple[int, float, int, int]]) -> int:
    """Most requests on the wire at one instant (send to completion)."""
    events = sorted(
        [(s[0], 1) for s in sends] + [(s[0] + round(s[1] * 1e6), -1) for s in sends], key=lambda x: (x[0], x[1])
    )
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def offline_facts(summary: RunSummary, requests_path: Path, submitted: int) -> dict[str, Any]:
    """Add `load.offline` (makespan, submit spread, peak in flight, client_limited) and a validity
    warning when the client limited the run; returns the facts."""
    sends = _measured(requests_path)
    if sends:  # first send to last completion: the window also holds the users' start before the first send
        first = min(s[0] for s in sends)
        makespan = (max(s[0] + s[1] * 1e6 for s in sends) - first) / 1e9
        spread: float | None = (max(s[0] for s in sends) - first) / 1e9
    else:
        makespan, spread = float(summary.window.duration_s or 0.0), None
    peak = peak_in_flight(sends) if sends else 0
    done = sum(1 for s in sends if s[3])
    per_s = (lambda x: round(x / makespan, 3)) if makespan > 0 else (lambda x: None)
    facts: dict[str, Any] = {
        "requests": submitted,
        "makespan_s": round(makespan, 4),
        "req_per_s": per_s(done),
        "input_tok_per_s": per_s(sum(s[2] for s in sends)),
        "output_tok_per_s": per_s(sum(s[3] for s in sends)),
        "submit_spread_s": None if spread is None else round(spread, 4),
        "peak_in_flight": peak,
        "latency_label": LATENCY_LABEL,
        "client_limited": None,
    }
    why = []
    if spread is not None and spread > max(SUBMIT_FLOOR_S, SUBMIT_SHARE_LIMIT * makespan):
        why.append(
            f"the {len(sends)} requests took {spread:.2f} s to go out ({100 * spread / max(makespan, 1e-9):.0f}% of the "
            f"{makespan:.2f} s makespan)"
        )
    if sends and peak < 0.9 * submitted:
        why.append(f"only {peak} of {submitted} were in flight at once")
    if why:
        facts["client_limited"] = "; ".join(why)
        summary.validity.warnings.append(
            f"client limited the offline run: {facts['client_limited']}; the throughput is the client's, not the engine's "
            "(use --processes N, raise the open-file limit, or submit fewer requests per process)"
        )
        summary.validity.ok = False
    summary.load.offline = OfflineFacts.model_validate(facts)
    return facts
