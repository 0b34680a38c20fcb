"""Text Generation Inference (router metrics, `docs/source/reference/metrics.md`).

TGI has no KV-usage, preemption or prefix-cache metric. KV usage is approximated as
`tgi_batch_current_max_tokens / tgi_batch_max_total_tokens` (tokens the running batch may reach
over the token budget; semantics unconfirmed). Token counts come from the `_sum` of the per-request
length histograms. Latencies are seconds; ITL is TGI's per-request mean time per token; TGI has
no TTFT histogram.
"""

from __future__ import annotations

from harness.telemetry.exposition import Snapshot
from harness.telemetry.profiles.base import PROFILES, Profile


class TgiProfile(Profile):
    def gauge(self, snap: Snapshot, canonical: str) -> float | None:
        if canonical != "kv_usage":
            return super().gauge(snap, canonical)
        used = self.collapse(snap.get("tgi_batch_current_max_tokens"))
        budget = self.collapse(snap.get("tgi_batch_max_total_tokens"))
        if used is None or not budget:
            return None
        return min(1.0, used / budget)

    def capacity(self, snap: Snapshot) -> dict[str, float | int | None]:
        budget = self.collapse(snap.get("tgi_batch_max_total_tokens"))
        return {"kv_capacity_tokens": int(budget) if budget else None, "block_size": None}


TGI = PROFILES.register("tgi")(
    TgiProfile(
        name="tgi",
        prefixes=("tgi_",),
        prom_prefix="tgi_",
        gauges={
            "running": ("tgi_batch_current_size",),
            "waiting": ("tgi_queue_size",),
        },
        counters={
            "prompt_tokens": ("tgi_request_input_length_sum",),
            "generation_tokens": ("tgi_request_generated_tokens_sum",),
            "requests_finished": ("tgi_request_success", "tgi_request_success_total"),
        },
        histograms={
            "itl": ("tgi_request_mean_time_per_token_duration",),
            "e2e": ("tgi_request_duration",),
            "queue": ("tgi_request_queue_duration",),
        },
        info_names=("tgi_batch_current_max_tokens", "tgi_batch_max_total_tokens"),
        notes=("kv_usage approximated from the batch token budget",),
    )
)
