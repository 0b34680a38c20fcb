"""SGLang (`sglang/srt/observability/metrics_collector.py`, 0.5.x).

- KV usage: `token_usage` (max of the full/SWA/mamba pools, 0-1).
- Preemptions: retractions (`num_retracted_requests_total`).
- Prefix cache: hits = Δ`cached_tokens_total` (summed over `cache_source`; the `total` fallback
  is used alone when present), queries = Δ`prompt_tokens_total` (assumes prompt tokens include
  cached ones; both count at request finish). `cache_hit_rate` is the last batch only: unused.
- Capacity: `max_total_num_tokens`, block size: `page_size`.
- Speculative decoding: only gauges (`spec_accept_rate`, `spec_accept_length`), averaged over
  the window's scrapes; no per-position data.
- Scheduler metrics carry tp/pp/ep rank labels; ranks of one replica are collapsed with max,
  data-parallel replicas (`dp_rank`) are summed.
"""

from __future__ import annotations

from harness.telemetry.exposition import Labels, Snapshot
from harness.telemetry.profiles.base import PROFILES, Profile


class SglangProfile(Profile):
    def select(self, canonical: str, items: list[tuple[Labels, float]]) -> list[tuple[Labels, float]]:
        if canonical == "prefix_hits":
            totals = [it for it in items if dict(it[0]).get("cache_source") == "total"]
            if totals:
                return totals
        return items

    def extra_gauges(self, snap: Snapshot) -> dict[str, float | None]:
        out = {}
        for key, name in (("spec_accept_rate", "sglang_spec_accept_rate"), ("spec_accept_length", "sglang_spec_accept_length")):
            items = snap.get(name)
            out[key] = self.collapse(items, mean=True) if items else None
        return out

    def capacity(self, snap: Snapshot) -> dict[str, float | int | None]:
        cap = self.collapse(snap.get("sglang_max_total_num_tokens"))
        page = snap.get("sglang_page_size")
        return {
            "kv_capacity_tokens": int(cap) if cap is not None else None,
            "block_size": int(page[0][1]) if page else None,
        }


def _s(*names: str) -> tuple[str, ...]:
    return tuple(f"sglang_{n}" for n in names)


SGLANG = PROFILES.register("sglang")(
    SglangProfile(
        name="sglang",
        prefixes=("sglang_",),
        prom_prefix="sglang[:_]",
        gauges={
            "kv_usage": _s("token_usage"),
            "running": _s("num_running_reqs"),
            "waiting": _s("num_queue_reqs"),
        },
        counters={
            "preemptions": _s("num_retracted_requests_total"),
            "prefix_queries": _s("prompt_tokens_total"),
            "prefix_hits": _s("cached_tokens_total"),
            "prompt_tokens": _s("prompt_tokens_total"),
            "generation_tokens": _s("generation_tokens_total"),
            "requests_finished": _s("num_requests_total"),
        },
        histograms={
            "ttft": _s("time_to_first_token_seconds"),
            "itl": _s("inter_token_latency_seconds"),
            "e2e": _s("e2e_request_latency_seconds"),
            "queue": _s("queue_time_seconds"),
        },
        info_names=_s("max_total_num_tokens", "page_size", "spec_accept_rate", "spec_accept_length"),
        shard_labels=frozenset({"tp_rank", "pp_rank", "moe_ep_rank"}),
    )
)
