"""Keep one run's prefix cache out of the next run's numbers.

The same seed gives the same prompts, so a second run against a long-lived server is served
from the first run's cached KV blocks (the audit saw 61-92 % hits for a workload that shares
nothing, and `compare` called it an improvement). Before a run the harness therefore:

1. resets the engine's prefix cache where the engine allows it (each engine kind's `reset_path`,
   tried in turn: vLLM `POST /reset_prefix_cache`, which needs `VLLM_SERVER_DEV_MODE=1`; SGLang
   `POST /flush_cache`; the simulated engine serves vLLM's), the same reset sweeps do between cells;
2. otherwise varies the prompts' words with a salt (`workload.prompt_salt`, recorded in
   scenario.yaml and summary.json): lengths, classes and shared-prefix structure stay identical,
   only the words change, so the run is still like-with-like (the salt is not in the fingerprint);
3. after the run, warns when the engine's prefix hit rate exceeds what the workload can produce.
"""

from __future__ import annotations

import http.client
import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from harness.engines import reset_paths
from harness.results.models.engine import EngineBlock
from harness.scenario.models import Scenario

#: hit rate above the workload's expectation by more than this (absolute) -> validity warning
HIT_RATE_MARGIN = 0.10


@dataclass
class CacheIsolation:
    """What was done before the run, for summary.json's `prefix_cache_isolation`."""

    mode: str  # "reset" | "salt" | "off"
    reset_path: str | None = None
    salt: int | None = None
    reason: str | None = None  # why the reset was not used

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "reset_path": self.reset_path, "prompt_salt": self.salt, "reason": self.reason}


#: per reset request; an idle engine answers a reset in milliseconds
RESET_TIMEOUT_S = 5.0


def post_reset(
    base_url: str, headers: dict[str, str] | None = None, timeout_s: float | None = None
) -> tuple[str | None, str]:
    """POST each known reset path; (the path that worked, "") or (None, what each answered).

    A path that gets no answer in time ends the attempt: a server that holds a request open
    (a stalled proxy) would hold the next path just as long, and the run has not started yet
    (the audit's stall_head server held every run 60 s here before its 3-s window)."""
    timeout_s = RESET_TIMEOUT_S if timeout_s is None else timeout_s
    tried = []
    for path in reset_paths():  # the kinds' paths in their documented order; the first 2xx wins
        req = urllib.request.Request(base_url.rstrip("/") + path, data=b"", method="POST", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                if 200 <= resp.status < 300:
                    return path, ""
                tried.append(f"{path} -> {resp.status}")
        except urllib.error.HTTPError as exc:
            tried.append(f"{path} -> {exc.code}")
        except (OSError, ValueError, http.client.HTTPException) as exc:  # HTTPException: a non-HTTP answer
            tried.append(f"{path} -> {type(exc).__name__}")
            if isinstance(exc, TimeoutError) or "timed out" in str(exc):
                break
    return None, ", ".join(tried)


def isolate(scenario: Scenario, base_url: str, headers: dict[str, str], reset: bool) -> tuple[Scenario, CacheIsolation]:
    """Reset the target's prefix cache, or salt the prompts when it cannot be reset.

    `reset` False (`--no-reset-prefix-cache`): neither; the warm cache is the user's intent. A
    scenario that sets `workload.prompt_salt` itself keeps it (and is still reset when possible)."""
    if not reset:
        return scenario, CacheIsolation("off", salt=scenario.workload.prompt_salt, reason="--no-reset-prefix-cache")
    path, problem = post_reset(base_url, headers)
    if path is not None:
        return scenario, CacheIsolation("reset", reset_path=path, salt=scenario.workload.prompt_salt)
    salt = scenario.workload.prompt_salt
    if salt is None:
        salt = secrets.randbelow(2**31 - 1) + 1
        scenario = scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"prompt_salt": salt})})
    return scenario, CacheIsolation("salt", salt=salt, reason=f"no prefix-cache reset ({problem})")


def workload_max_hit_rate(scenario: Scenario, expected: float | None) -> float | None:
    """The hit rate the workload can produce: the shared-prefix expectation, 0 for a workload that
    shares nothing, None when unknown (dataset prompts may share text)."""
    if any(
        c.dataset is not None or c.session is not None or c.block_trace is not None for c in scenario.workload.classes
    ):
        return None  # sessions' histories and block traces are meant to hit; their ideals are in summary.json
    return expected if expected is not None else 0.0


def hit_rate_warning(engine: EngineBlock, allowed: float | None) -> str | None:
    """A validity warning when the engine served more from its prefix cache than the workload allows."""
    hit = engine.prefix_cache.hit_rate
    if hit is None or allowed is None or hit <= allowed + HIT_RATE_MARGIN:
        return None
    return (
        f"Prefix cache hit rate {100 * hit:.1f} % exceeds the {100 * allowed:.0f} % this workload can produce: "
        "the engine is serving prompts cached by an earlier run (same seed, same prompts); latencies read "
        "low. Reset the cache (vLLM: VLLM_SERVER_DEV_MODE=1 enables POST /reset_prefix_cache), restart "
        "the server, or change workload.prompt_salt / the seed."
    )
