#!/usr/bin/env python3
"""Write the Grafana dashboards in grafana/dashboards/ (stdlib only; run from anywhere).

    python grafana/generate.py           # rewrite the JSON files
    python grafana/generate.py --check   # exit 1 when a file differs from what this script writes

The JSON files are committed; edit this script, not the JSON, and re-run it. Conventions:
- Every panel and target uses the `${datasource}` variable.
- Engine metric names are matched in both spellings, `{__name__=~"vllm[:_]..."}`: recent
  prometheus_client versions escape `vllm:` to `vllm_` in OpenMetrics scrapes (Prometheus
  negotiates OpenMetrics), older ones and the plain text format keep the colon.
- The tuning dashboard is engine-agnostic where vLLM and SGLang share a meaning
  (`vllm[:_]x|sglang[:_]y`), and has one target per engine where they do not.
- Client-side (harness_) series carry `run`, `scenario`, `config`, `model` labels (see
  harness/metrics/exporter.py); `$config` and `$run` filter them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the harness of this checkout
from harness.metrics.table import shown  # noqa: E402

OUT = Path(__file__).resolve().parent / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"

# ----------------------------------------------------------------------------- selectors
ENGINE = 'job=~"$job", instance=~"$instance", model_name=~"$model"'
ENGINE_NO_MODEL = 'job=~"$job", instance=~"$instance"'
HARNESS = 'config=~"$config", run=~"$run"'
OK = 'outcome="ok"'
NOT_OK = 'outcome!="ok"'
MEASURED_OK = 'outcome="ok", phase="measure"'
GPU = 'instance=~"$gpu_instance"'


def eng(names: str, extra: str = "", model: bool = True) -> str:
    """Selector for engine metrics by name regex (both spellings), with the engine filters."""
    filters = ENGINE if model else ENGINE_NO_MODEL
    return "{" + f'__name__=~"{names}", {filters}' + (f", {extra}" if extra else "") + "}"


def vllm(name: str) -> str:
    return f"vllm[:_]{name}"


def sgl(name: str) -> str:
    return f"sglang[:_]{name}"


def both(v: str, s: str) -> str:
    return f"{vllm(v)}|{sgl(s)}"


def h(metric: str, extra: str = "") -> str:
    """Selector for a harness_ metric."""
    return metric + "{" + HARNESS + (f", {extra}" if extra else "") + "}"


def quantile(q: float, sel: str, by: str = "le", window: str = RI, fn: str = "rate") -> str:
    return f"histogram_quantile({q}, sum by ({by}) ({fn}({sel}[{window}])))"


def mean(sum_sel: str, count_sel: str) -> str:
    return f"sum(rate({sum_sel}[{RI}])) / (sum(rate({count_sel}[{RI}])) > 0)"


def ratio(num: str, den: str, window: str = RI, fn: str = "rate") -> str:
    return f"sum({fn}({num}[{window}])) / (sum({fn}({den}[{window}])) > 0)"


# ----------------------------------------------------------------------------- building blocks
class Board:
    def __init__(self, uid: str, title: str, description: str, tags: list[str], variables: list[dict[str, Any]]) -> None:
        self.uid = uid
        self.title = title
        self.description = description
        self.tags = tags
        self.variables = variables
        self.panels: list[dict[str, Any]] = []
        self._id = 0
        self._x = 0
        self._y = 0
        self._row_h = 0

    def _next_id(self) -> int:
        self._id += 1
        return self._id

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"id": self._next_id(), "type": "row", "title": title, "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self._y}, "panels": []})
        self._y += 1

    def _newline(self) -> None:
        if self._x:
            self._y += self._row_h
            self._x = 0
            self._row_h = 0

    def _place(self, w: int, hgt: int) -> dict[str, int]:
        if self._x + w > 24:
            self._newline()
        pos = {"h": hgt, "w": w, "x": self._x, "y": self._y}
        self._x += w
        self._row_h = max(self._row_h, hgt)
        return pos

    def panel(self, kind: str, title: str, targets: list[dict[str, Any]], *, w: int = 8, hgt: int = 8,
              unit: str = "short", description: str = "", decimals: int | None = None,
              min_: float | None = None, max_: float | None = None, stat_calc: str = "lastNotNull",
              thresholds: list[tuple[float | None, str]] | None = None) -> None:
        refs = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        tlist = []
        for i, t in enumerate(targets):
            tt = {"refId": refs[i], "datasource": DS, "editorMode": "code", "expr": t["expr"],
                  "legendFormat": t.get("legend", "__auto"), "range": not t.get("instant", False),
                  "instant": bool(t.get("instant", False))}
            if t.get("format"):
                tt["format"] = t["format"]
            tlist.append(tt)
        defaults: dict[str, Any] = {"unit": unit}
        if decimals is not None:
            defaults["decimals"] = decimals
        if min_ is not None:
            defaults["min"] = min_
        if max_ is not None:
            defaults["max"] = max_
        steps = [{"color": c, "value": v} for v, c in (thresholds or [(None, "green")])]
        defaults["thresholds"] = {"mode": "absolute", "steps": steps}
        p: dict[str, Any] = {"id": self._next_id(), "type": kind, "title": title, "description": description,
                             "datasource": DS, "gridPos": self._place(w, hgt), "targets": tlist,
                             "fieldConfig": {"defaults": defaults, "overrides": []}}
        if kind == "timeseries":
            defaults["color"] = {"mode": "palette-classic"}
            defaults["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0, "showPoints": "never",
                                  "spanNulls": False, "axisPlacement": "auto"}
            p["options"] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                            "tooltip": {"mode": "multi", "sort": "desc"}}
        elif kind == "stat":
            defaults["color"] = {"mode": "thresholds"}
            p["options"] = {"reduceOptions": {"calcs": [stat_calc], "fields": "", "values": False},
                            "colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
                            "textMode": "auto"}
        elif kind == "heatmap":
            p["options"] = {"calculate": False, "yAxis": {"unit": unit}, "cellGap": 1,
                            "color": {"mode": "scheme", "scheme": "Spectral", "steps": 64},
                            "legend": {"show": True}, "tooltip": {"show": True, "yHistogram": False}}
        elif kind == "table":
            p["options"] = {"showHeader": True, "cellHeight": "sm"}
            p["transformations"] = [{"id": "labelsToFields", "options": {"mode": "columns"}}]
        self.panels.append(p)

    def timeseries(self, title: str, targets: list[dict[str, Any]], **kw: Any) -> None:
        self.panel("timeseries", title, targets, **kw)

    def stat(self, title: str, targets: list[dict[str, Any]], **kw: Any) -> None:
        kw.setdefault("w", 4)
        kw.setdefault("hgt", 4)
        self.panel("stat", title, targets, **kw)

    def to_json(self) -> dict[str, Any]:
        return {
            "annotations": {"list": [{
                "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
                "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}]},
            "description": self.description,
            "editable": True,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "id": None,
            "links": [{"asDropdown": True, "icon": "external link", "includeVars": True, "keepTime": True,
                       "tags": ["llm-harness"], "targetBlank": False, "title": "LLM harness", "type": "dashboards"}],
            "liveNow": False,
            "panels": self.panels,
            "refresh": "5s",
            "schemaVersion": 39,
            "tags": self.tags,
            "templating": {"list": self.variables},
            "time": {"from": "now-30m", "to": "now"},
            "timepicker": {"refresh_intervals": ["5s", "10s", "30s", "1m", "5m"]},
            "timezone": "",
            "title": self.title,
            "uid": self.uid,
            "version": 1,
            "weekStart": "",
        }


def t(expr: str, legend: str = "__auto", **kw: Any) -> dict[str, Any]:
    return {"expr": expr, "legend": legend, **kw}


# ----------------------------------------------------------------------------- variables
def var_datasource() -> dict[str, Any]:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [], "refresh": 1,
            "regex": "", "skipUrlSync": False}


def var_query(name: str, label: str, query: str, *, include_all: bool = True, multi: bool = True) -> dict[str, Any]:
    v: dict[str, Any] = {"name": name, "label": label, "type": "query", "datasource": DS,
                         "definition": query,
                         "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
                         "current": {}, "hide": 0, "includeAll": include_all, "multi": multi, "options": [],
                         "refresh": 2, "regex": "", "skipUrlSync": False, "sort": 1}
    if include_all:
        v["allValue"] = ".*"
        v["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return v


def engine_variables(names: str) -> list[dict[str, Any]]:
    """job, instance and model variables found through `names` (a __name__ regex)."""
    sel = '{__name__=~"' + names + '"'
    return [
        var_query("job", "Engine job", f"label_values({sel}}}, job)"),
        var_query("instance", "Engine instance", f'label_values({sel}, job=~"$job"}}, instance)'),
        var_query("model", "Model", f'label_values({sel}, job=~"$job", instance=~"$instance"}}, model_name)'),
    ]


HARNESS_VARS = [
    var_query("config", "Sweep config", "label_values(harness_run_info, config)"),
    var_query("run", "Run", 'label_values(harness_run_info{config=~"$config"}, run)'),
]
GPU_VAR = var_query("gpu_instance", "GPU exporter (DCGM)", "label_values(DCGM_FI_DEV_FB_USED, instance)")

QS = ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"))


def client_vs_engine(client: str, engine_names: str) -> list[dict[str, Any]]:
    out = [t(quantile(q, h(f"{client}_bucket")), f"client {name}") for q, name in QS]
    out += [t(quantile(q, eng(engine_names)), f"engine {name}") for q, name in QS]
    return out


# ============================================================================= tuning
def tuning() -> Board:
    running = both("num_requests_running", "num_running_reqs")
    waiting = both("num_requests_waiting", "num_queue_reqs")
    kv = both("kv_cache_usage_perc", "token_usage")
    preempt = both("num_preemptions_total", "num_retracted_requests_total")
    b = Board("llm-harness-tuning", "LLM tuning: client vs engine",
              "The tuning guides' record list at a glance: what users feel (harness_ metrics from `harness run "
              "--metrics-port`) beside why (engine metrics, vLLM or SGLang names; GPU memory from DCGM).",
              ["llm-harness", "vllm", "sglang", "tuning"],
              [var_datasource(), *engine_variables(f"{running}"), *HARNESS_VARS, GPU_VAR])

    b.row("At a glance (over the selected time range)")
    b.stat("Requests/s (client, ok)", [t(f'sum(rate({h("harness_requests_total", MEASURED_OK)}[{RI}]))', "req/s")],
           unit="reqps", decimals=2, stat_calc="mean", description="Measured requests that finished without error; mean over the range.")
    b.stat("Output tokens/s (client)", [t(f'sum(rate({h("harness_output_tokens_total")}[{RI}]))', "tok/s")],
           unit="short", decimals=0, stat_calc="mean")
    b.stat("TTFT p99 (client)", [t(quantile(0.99, h("harness_ttft_seconds_bucket"), window="$__range", fn="increase"), "p99")], unit="s")
    b.stat("ITL p99 (client, per token)", [t(quantile(0.99, h("harness_itl_seconds_bucket"), window="$__range", fn="increase"), "p99")], unit="s")
    b.stat("E2E p99 (client)", [t(quantile(0.99, h("harness_e2e_seconds_bucket"), window="$__range", fn="increase"), "p99")], unit="s")
    b.stat("Failed requests (client)", [t(f'sum(increase({h("harness_requests_total", NOT_OK)}[$__range])) or vector(0)', "failed")],
           unit="short", decimals=0, thresholds=[(None, "green"), (1, "red")])
    b.stat("KV cache usage (max)", [t(f"max(max_over_time({eng(kv)}[$__range]))", "max")], unit="percentunit",
           thresholds=[(None, "green"), (0.9, "orange"), (0.98, "red")])
    b.stat("Preemptions (in range)", [t(f"sum(increase({eng(preempt)}[$__range]))", "preemptions")], unit="short",
           decimals=0, thresholds=[(None, "green"), (0.001, "orange"), (100, "red")],
           description="vLLM num_preemptions_total; SGLang num_retracted_requests_total (retraction).")
    b.stat("Prefix-cache hit rate (range)", [
        t(ratio(eng(vllm("prefix_cache_hits_total")), eng(vllm("prefix_cache_queries_total")), "$__range", "increase"), "vLLM"),
        t(ratio(eng(sgl("cached_tokens_total")), eng(sgl("prompt_tokens_total")), "$__range", "increase"), "SGLang"),
    ], unit="percentunit", description="Tokens served from the prefix cache / prompt tokens looked up.")
    b.stat("Spec-decode acceptance", [
        t(ratio(eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_draft_tokens_total")), "$__range", "increase"), "vLLM"),
        t(f"avg(avg_over_time({eng(sgl('spec_accept_rate'))}[$__range]))", "SGLang"),
    ], unit="percentunit", description="Accepted / proposed draft tokens (only with speculative decoding).")
    b.stat("GPU memory used (max, DCGM)", [t(f"max(max_over_time(DCGM_FI_DEV_FB_USED{{{GPU}}}[$__range]))", "max")],
           unit="mbytes", description="DCGM_FI_DEV_FB_USED (MiB) from dcgm-exporter.")
    b.stat("GPU memory growth (range)", [
        t(f"max(max_over_time({eng('sim[:_]gpu_memory_used_bytes')}[$__range]) - min_over_time({eng('sim[:_]gpu_memory_used_bytes')}[$__range]))",
          "simulated"),
        t(f"max(max_over_time(DCGM_FI_DEV_FB_USED{{{GPU}}}[$__range]) - min_over_time(DCGM_FI_DEV_FB_USED{{{GPU}}}[$__range])) * 1048576",
          "DCGM"),
    ], unit="bytes", thresholds=[(None, "green"), (268435456, "orange"), (2147483648, "red")],
        description="Memory grown while serving (max - min over the range): CUDA-graph pool growth for uncaptured batch "
                    "sizes or fragmentation (guide 001, 2.2). `harness run` reports it in summary.json diagnosis.memory.")
    b.stat("Send lag p99 (client)", [t(quantile(0.99, h("harness_send_lag_seconds_bucket"), window="$__range", fn="increase"), "p99")],
           unit="s", thresholds=[(None, "green"), (0.005, "orange"), (0.05, "red")],
           description="Open loop: actual minus intended send time. High = the client could not keep up.")

    b.row("Latency: client (harness) beside engine")
    b.timeseries("TTFT", client_vs_engine("harness_ttft_seconds", both("time_to_first_token_seconds_bucket", "time_to_first_token_seconds_bucket")),
                 unit="s", description="Client: first content chunk, from the intended send in open loop. Engine: its own histogram.")
    b.timeseries("ITL (per token)", client_vs_engine("harness_itl_seconds", both("inter_token_latency_seconds_bucket", "inter_token_latency_seconds_bucket")),
                 unit="s", description="Client: a chunk of k tokens after a gap g counts k samples of g/k.")
    b.timeseries("E2E latency", client_vs_engine("harness_e2e_seconds", both("e2e_request_latency_seconds_bucket", "e2e_request_latency_seconds_bucket")), unit="s")
    b.timeseries("TPOT per request", client_vs_engine("harness_tpot_seconds", both("request_time_per_output_token_seconds_bucket", "request_time_per_output_token_seconds_bucket")),
                 unit="s", description="(E2E - TTFT) / (output tokens - 1) per request.")
    b.timeseries("TTFT p99 by request class (client)", [t(quantile(0.99, h("harness_ttft_seconds_bucket"), by="le, class"), "{{class}}")], unit="s")
    b.timeseries("TTFT p99 and ITL p99 by sweep config (client)", [
        t(quantile(0.99, h("harness_ttft_seconds_bucket"), by="le, config"), "TTFT {{config}}"),
        t(quantile(0.99, h("harness_itl_seconds_bucket"), by="le, config"), "ITL {{config}}"),
    ], unit="s", description="Split by the config label a sweep (or `harness run --label config=...`) sets.")

    b.row("Throughput and load")
    b.timeseries("Requests/s", [
        t(f'sum(rate({h("harness_requests_total", OK)}[{RI}]))', "client ok"),
        t(f'sum(rate({h("harness_requests_total", NOT_OK)}[{RI}]))', "client failed"),
        t(f"sum(rate({eng(both('request_success_total', 'num_requests_total'))}[{RI}]))", "engine finished"),
    ], unit="reqps")
    b.timeseries("Target vs achieved rate", [
        t(f'sum({h("harness_target_rate_requests_per_second")})', "target"),
        t(f'sum(rate({h("harness_requests_sent_total")}[{RI}]))', "sent"),
        t(f'sum(rate({h("harness_requests_total")}[{RI}]))', "finished"),
    ], unit="reqps", description="Open loop: the scenario's rate, the rate requests actually went out, and completions.")
    b.timeseries("Tokens/s", [
        t(f'sum(rate({h("harness_input_tokens_total")}[{RI}]))', "client input"),
        t(f'sum(rate({h("harness_output_tokens_total")}[{RI}]))', "client output"),
        t(f"sum(rate({eng(both('prompt_tokens_total', 'prompt_tokens_total'))}[{RI}]))", "engine prompt"),
        t(f"sum(rate({eng(both('generation_tokens_total', 'generation_tokens_total'))}[{RI}]))", "engine generation"),
    ], unit="short", description="Client: measured successful requests. Engine: every request it served.")
    b.timeseries("Concurrency: users, in flight, engine running / waiting", [
        t(f'sum({h("harness_active_users")})', "client users"),
        t(f'sum({h("harness_in_flight_requests")})', "client in flight"),
        t(f'sum({h("harness_target_users")})', "target users / max in flight"),
        t(f"sum({eng(running)})", "engine running"),
        t(f"sum({eng(waiting)})", "engine waiting"),
    ], unit="short")
    b.timeseries("Failed requests/s by kind (client)", [
        t(f'sum by (outcome) (rate({h("harness_requests_total", NOT_OK)}[{RI}]))', "{{outcome}}"),
    ], unit="reqps")
    b.timeseries("Output tokens/s by sweep config (client)", [
        t(f'sum by (config) (rate({h("harness_output_tokens_total")}[{RI}]))', "{{config}}"),
    ], unit="short")

    b.row("Engine: KV cache, preemption, prefix cache, speculative decoding, GPU memory")
    b.timeseries("KV cache usage", [t(f"max by (instance) ({eng(kv)})", "{{instance}}")], unit="percentunit", min_=0, max_=1,
                 description="vLLM kv_cache_usage_perc; SGLang token_usage (0-1).")
    b.timeseries("Running / waiting requests (engine)", [
        t(f"sum by (instance) ({eng(running)})", "running {{instance}}"),
        t(f"sum by (instance) ({eng(waiting)})", "waiting {{instance}}"),
    ], unit="short")
    b.timeseries("Preemptions/s", [t(f"sum(rate({eng(preempt)}[{RI}]))", "preemptions/s")], unit="short",
                 description="vLLM num_preemptions_total; SGLang retracted requests.")
    b.timeseries("Prefix-cache hit rate", [
        t(ratio(eng(vllm("prefix_cache_hits_total")), eng(vllm("prefix_cache_queries_total"))), "vLLM engine"),
        t(ratio(eng(sgl("cached_tokens_total")), eng(sgl("prompt_tokens_total"))), "SGLang engine"),
        t(f'max({h("harness_expected_prefix_hit_rate")})', "expected (scenario)"),
    ], unit="percentunit", min_=0, max_=1)
    b.timeseries("Speculative decoding: acceptance rate", [
        t(ratio(eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_draft_tokens_total"))), "vLLM"),
        t(f"avg({eng(sgl('spec_accept_rate'))})", "SGLang"),
    ], unit="percentunit", min_=0, max_=1)
    b.timeseries("Speculative decoding: mean acceptance length", [
        t("1 + " + ratio(eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_drafts_total"))), "vLLM"),
        t(f"avg({eng(sgl('spec_accept_length'))})", "SGLang"),
    ], unit="short", description="Tokens per verification step: 1 + accepted / drafts.")
    b.timeseries("Tokens per engine step (vLLM)", [
        t(quantile(0.5, eng(vllm("iteration_tokens_total_bucket"))), "p50"),
        t(quantile(0.99, eng(vllm("iteration_tokens_total_bucket"))), "p99"),
    ], unit="short", description="Scheduled tokens per engine iteration. Large steps while streams decode are long prefills "
                                 "not chunked: every decode waits for them (ITL spikes; `harness run` reports ITL inside vs "
                                 "outside long prefills in summary.json diagnosis.interference). Lower --max-num-batched-tokens "
                                 "or enable chunked prefill.")
    b.timeseries("GPU memory (simulated engine)", [
        t(f"sum by (instance) ({eng('sim[:_]gpu_memory_used_bytes')})", "used {{instance}}"),
        t(f"sum by (instance) ({eng('sim[:_]gpu_memory_total_bytes')})", "total {{instance}}"),
    ], unit="bytes", description="The simulator's emulated device memory (it has no NVML): startup level plus CUDA-graph pool "
                                 "growth for batch sizes outside its capture sizes. Not a vLLM metric.")
    b.timeseries("GPU memory (DCGM)", [
        t(f"sum by (instance, gpu) (DCGM_FI_DEV_FB_USED{{{GPU}}})", "used {{instance}} gpu {{gpu}}"),
        t(f"sum by (instance, gpu) (DCGM_FI_DEV_FB_USED{{{GPU}}} + DCGM_FI_DEV_FB_FREE{{{GPU}}})", "total {{instance}} gpu {{gpu}}"),
    ], unit="mbytes", description="Framebuffer used and used+free, MiB, from dcgm-exporter.")

    b.row("Client health")
    b.timeseries("Send lag (open loop)", [t(quantile(q, h("harness_send_lag_seconds_bucket")), name) for q, name in QS], unit="s",
                 description="How late requests went out. Latencies count from the intended time regardless.")
    b.timeseries("Client CPU (cores)", [t(f'sum(rate({h("harness_client_cpu_seconds_total")}[{RI}]))', "load processes")], unit="short",
                 description="Near 1 core per load process = the client is saturated; use --processes.")
    b.timeseries("Mean latency (client)", [  # the metric table's live histograms shown in Grafana
        t(mean(h(f"harness_{m.live.name}_seconds_sum"), h(f"harness_{m.live.name}_seconds_count")), m.live.name.upper())
        for m in shown("grafana") if m.live is not None
    ], unit="s")
    return b


# ============================================================================= vLLM
def vllm_board() -> Board:
    b = Board("llm-harness-vllm", "vLLM engine",
              "vLLM V1 metrics (names from vllm/v1/metrics/loggers.py, both the vllm: and the escaped vllm_ spelling), "
              "after vLLM's own example dashboards plus KV-cache and speculative-decoding panels.",
              ["llm-harness", "vllm"], [var_datasource(), *engine_variables(vllm("num_requests_running"))])

    def lat(title: str, name: str, desc: str = "") -> None:
        sel = eng(vllm(f"{name}_bucket"))
        targets = [t(quantile(q, sel), n) for q, n in ((0.99, "p99"), (0.95, "p95"), (0.9, "p90"), (0.5, "p50"))]
        targets.append(t(mean(eng(vllm(f"{name}_sum")), eng(vllm(f"{name}_count"))), "mean"))
        b.timeseries(title, targets, unit="s", description=desc)

    b.row("Latency")
    lat("E2E request latency", "e2e_request_latency_seconds")
    lat("Time to first token", "time_to_first_token_seconds")
    lat("Inter-token latency", "inter_token_latency_seconds")
    lat("Time per output token (per request)", "request_time_per_output_token_seconds")
    lat("Queue time", "request_queue_time_seconds", "Time in WAITING.")
    b.timeseries("Prefill and decode time (mean)", [
        t(mean(eng(vllm("request_prefill_time_seconds_sum")), eng(vllm("request_prefill_time_seconds_count"))), "prefill"),
        t(mean(eng(vllm("request_decode_time_seconds_sum")), eng(vllm("request_decode_time_seconds_count"))), "decode"),
        t(mean(eng(vllm("request_inference_time_seconds_sum")), eng(vllm("request_inference_time_seconds_count"))), "inference"),
    ], unit="s")

    b.row("Throughput and scheduler")
    b.timeseries("Token throughput", [
        t(f"sum(rate({eng(vllm('prompt_tokens_total'))}[{RI}]))", "prompt tokens/s"),
        t(f"sum(rate({eng(vllm('generation_tokens_total'))}[{RI}]))", "generation tokens/s"),
    ], unit="short")
    b.timeseries("Scheduler state", [
        t(f"sum({eng(vllm('num_requests_running'))})", "running"),
        t(f"sum({eng(vllm('num_requests_waiting'))})", "waiting"),
        t(f"sum by (reason) ({eng(vllm('num_requests_waiting_by_reason'))})", "waiting: {{reason}}"),
    ], unit="short")
    b.timeseries("Finished requests by reason", [
        t(f"sum by (finished_reason) (increase({eng(vllm('request_success_total'))}[{RI}]))", "{{finished_reason}}"),
    ], unit="short")
    b.timeseries("Tokens per engine step", [
        t(quantile(0.5, eng(vllm("iteration_tokens_total_bucket"))), "p50"),
        t(quantile(0.99, eng(vllm("iteration_tokens_total_bucket"))), "p99"),
    ], unit="short", description="vllm:iteration_tokens_total is a histogram despite its name.")
    b.panel("heatmap", "Prompt length", [t(f"sum by (le) (increase({eng(vllm('request_prompt_tokens_bucket'))}[{RI}]))", "{{le}}", format="heatmap")],
            unit="short")
    b.panel("heatmap", "Generation length", [t(f"sum by (le) (increase({eng(vllm('request_generation_tokens_bucket'))}[{RI}]))", "{{le}}", format="heatmap")],
            unit="short")

    b.row("KV cache and prefix cache")
    kv = eng(vllm("kv_cache_usage_perc"))
    b.stat("KV cache usage (max)", [t(f"max({kv})", "max")], unit="percentunit", w=6,
           thresholds=[(None, "green"), (0.9, "orange"), (0.98, "red")])
    b.stat("KV cache usage (mean)", [t(f"avg({kv})", "mean")], unit="percentunit", w=6)
    b.stat("Prefix cache hit rate", [t(ratio(eng(vllm("prefix_cache_hits_total")), eng(vllm("prefix_cache_queries_total"))), "hit rate")],
           unit="percentunit", w=6)
    b.stat("Preemptions/s", [t(f"sum(rate({eng(vllm('num_preemptions_total'))}[{RI}]))", "preemptions/s")], unit="short", w=6,
           thresholds=[(None, "green"), (0.001, "orange"), (1, "red")])
    b.timeseries("KV cache usage", [t(f"max by (instance, engine) ({kv})", "{{instance}} engine {{engine}}")], unit="percentunit", min_=0, max_=1)
    b.timeseries("Prefix cache", [
        t(ratio(eng(vllm("prefix_cache_hits_total")), eng(vllm("prefix_cache_queries_total"))), "hit rate (prefix cache)"),
        t(ratio(eng(vllm("prompt_tokens_cached_total")), eng(vllm("prompt_tokens_total"))), "cached prompt tokens / prompt tokens"),
    ], unit="percentunit", min_=0, max_=1)
    b.timeseries("Preemptions", [
        t(f"sum(rate({eng(vllm('num_preemptions_total'))}[{RI}]))", "preemptions/s"),
        t(f"sum(increase({eng(vllm('request_num_preemptions_count'))}[{RI}]))", "finished requests"),
    ], unit="short")
    b.timeseries("Prompt tokens by source", [
        t(f"sum by (source) (rate({eng(vllm('prompt_tokens_by_source_total'))}[{RI}]))", "{{source}}"),
    ], unit="short")
    b.panel("table", "KV cache config (vllm:cache_config_info)", [
        t(f"max by (instance, engine, block_size, num_gpu_blocks, kv_cache_size_tokens, kv_cache_max_concurrency, "
          f"gpu_memory_utilization, cache_dtype, enable_prefix_caching) ({eng(vllm('cache_config_info'), model=False)})",
          "", instant=True, format="table"),
    ], w=16, unit="short", description="Capacity from the labels (appears once KV sizing is done); no model_name label.")

    b.row("Speculative decoding (only with --speculative-config)")
    b.timeseries("Acceptance rate", [
        t(ratio(eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_draft_tokens_total"))), "accepted / draft tokens"),
    ], unit="percentunit", min_=0, max_=1)
    b.timeseries("Mean acceptance length", [
        t("1 + " + ratio(eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_drafts_total"))), "tokens per step"),
    ], unit="short")
    b.timeseries("Acceptance by draft position", [
        t(f"sum by (position) (rate({eng(vllm('spec_decode_num_accepted_tokens_per_pos_total'))}[{RI}])) / ignoring(position) group_left() "
          f"(sum(rate({eng(vllm('spec_decode_num_drafts_total'))}[{RI}])) > 0)", "position {{position}}"),
    ], unit="percentunit", min_=0, max_=1)
    return b


# ============================================================================= SGLang
def sglang_board() -> Board:
    b = Board("llm-harness-sglang", "SGLang engine",
              "SGLang metrics (sglang/srt/observability/metrics_collector.py; start with --enable-metrics), "
              "after SGLang's own example dashboard, both the sglang: and the escaped sglang_ spelling.",
              ["llm-harness", "sglang"], [var_datasource(), *engine_variables(sgl("num_running_reqs"))])

    def lat(title: str, name: str) -> None:
        sel = eng(sgl(f"{name}_bucket"))
        targets = [t(quantile(q, sel), n) for q, n in ((0.99, "p99"), (0.9, "p90"), (0.5, "p50"))]
        targets.append(t(mean(eng(sgl(f"{name}_sum")), eng(sgl(f"{name}_count"))), "mean"))
        b.timeseries(title, targets, unit="s")

    b.row("Latency")
    lat("E2E request latency", "e2e_request_latency_seconds")
    lat("Time to first token", "time_to_first_token_seconds")
    lat("Inter-token latency", "inter_token_latency_seconds")
    lat("Time per output token (per request)", "request_time_per_output_token_seconds")
    lat("Queue time", "queue_time_seconds")
    b.panel("heatmap", "E2E latency distribution", [
        t(f"sum by (le) (increase({eng(sgl('e2e_request_latency_seconds_bucket'))}[{RI}]))", "{{le}}", format="heatmap"),
    ], unit="s")

    b.row("Throughput and scheduler")
    b.timeseries("Token throughput", [
        t(f"sum(rate({eng(sgl('prompt_tokens_total'))}[{RI}]))", "prompt tokens/s (finished requests)"),
        t(f"sum(rate({eng(sgl('generation_tokens_total'))}[{RI}]))", "generation tokens/s (finished requests)"),
        t(f"sum({eng(sgl('gen_throughput'))})", "gen_throughput (decode log interval)"),
    ], unit="short")
    b.timeseries("Requests", [
        t(f"sum({eng(sgl('num_running_reqs'))})", "running"),
        t(f"sum({eng(sgl('num_queue_reqs'))})", "queued"),
        t(f"sum({eng(sgl('num_grammar_queue_reqs'))})", "grammar queue"),
    ], unit="short")
    b.timeseries("Finished / aborted requests/s", [
        t(f"sum(rate({eng(sgl('num_requests_total'))}[{RI}]))", "finished"),
        t(f"sum(rate({eng(sgl('num_aborted_requests_total'))}[{RI}]))", "aborted"),
    ], unit="reqps")

    b.row("KV cache, radix cache, retraction")
    b.timeseries("Token (KV) usage", [
        t(f"max by (instance) ({eng(sgl('token_usage'))})", "token_usage {{instance}}"),
        t(f"sum({eng(sgl('kv_used_tokens'))}) / (sum({eng(sgl('max_total_num_tokens'))}) > 0)", "kv_used / max_total_num_tokens"),
    ], unit="percentunit", min_=0, max_=1, description="token_usage = max(full, swa, mamba) pool usage.")
    b.timeseries("KV token slots", [
        t(f"sum({eng(sgl('kv_used_tokens'))})", "used"),
        t(f"sum({eng(sgl('kv_available_tokens'))})", "available"),
        t(f"sum({eng(sgl('kv_evictable_tokens'))})", "evictable"),
        t(f"sum({eng(sgl('max_total_num_tokens'))})", "max"),
    ], unit="short")
    b.timeseries("Cache hit rate", [
        t(f"avg({eng(sgl('cache_hit_rate'))})", "last prefill batch (cache_hit_rate)"),
        t(ratio(eng(sgl("cached_tokens_total")), eng(sgl("prompt_tokens_total"))), "cached / prompt tokens"),
    ], unit="percentunit", min_=0, max_=1)
    b.timeseries("Retractions (preemption analogue)", [
        t(f"sum(rate({eng(sgl('num_retracted_requests_total'))}[{RI}]))", "retracted requests/s"),
        t(f"sum({eng(sgl('num_retracted_reqs'))})", "retracted now"),
    ], unit="short")

    b.row("Speculative decoding")
    b.timeseries("Acceptance", [
        t(f"avg({eng(sgl('spec_accept_rate'))})", "accept rate"),
    ], unit="percentunit", min_=0, max_=1)
    b.timeseries("Acceptance length", [t(f"avg({eng(sgl('spec_accept_length'))})", "accept length")], unit="short")
    return b


BOARDS = {"tuning.json": tuning, "vllm.json": vllm_board, "sglang.json": sglang_board}


def render() -> dict[str, str]:
    return {name: json.dumps(fn().to_json(), indent=2) + "\n" for name, fn in BOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a dashboard file is out of date")
    args = ap.parse_args(argv)
    stale = []
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        path = OUT / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print("out of date (run python grafana/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
