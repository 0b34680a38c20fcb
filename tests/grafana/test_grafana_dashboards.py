"""The dashboards, provisioning files and example Prometheus config are well formed (no servers).

Structure only; tests/grafana/test_grafana_promql.py runs every expression against Prometheus.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_stack import BUILTINS, DASHBOARDS, GRAFANA, PROMTOOL, ROOT, VAR_RE, load, panels, targets, variable_queries

DS = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = {"row", "timeseries", "stat", "heatmap", "table"}
IDS = [p.name for p in DASHBOARDS]


def test_the_expected_dashboards_exist() -> None:
    assert {p.name for p in DASHBOARDS} == {"tuning.json", "vllm.json", "sglang.json"}


def test_files_are_what_the_generator_writes() -> None:
    proc = subprocess.run([sys.executable, str(GRAFANA / "generate.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_uids_and_titles_are_unique_across_files() -> None:
    dashes = [load(p) for p in DASHBOARDS]
    assert len({d["uid"] for d in dashes}) == len(dashes)
    assert len({d["title"] for d in dashes}) == len(dashes)


@pytest.mark.parametrize("path", DASHBOARDS, ids=IDS)
def test_dashboard_structure(path: Path) -> None:
    d = load(path)
    for key in ("title", "uid", "panels", "templating", "time", "schemaVersion", "tags", "refresh"):
        assert key in d, key
    assert d["id"] is None  # importable and provisionable anywhere
    assert 36 <= d["schemaVersion"] <= 41
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", d["uid"])
    ids = [p["id"] for p in panels(d)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    titles = [p["title"] for p in panels(d) if p["type"] != "row"]
    assert len(titles) == len(set(titles)), "panel titles must be unique (the PromQL test names panels by title)"
    cells: set[tuple[int, int]] = set()
    for p in panels(d):
        assert p["type"] in PANEL_TYPES, p["type"]
        g = p["gridPos"]
        assert all(isinstance(g[k], int) and g[k] >= 0 for k in ("x", "y", "w", "h")), g
        assert g["w"] >= 1 and g["h"] >= 1 and g["x"] + g["w"] <= 24, g
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not (cells & mine), f"panel {p['title']!r} overlaps another"
        cells |= mine
        if p["type"] == "row":
            continue
        assert p["datasource"] == DS, p["title"]
        assert p["targets"], f"{p['title']}: no targets"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DS, p["title"]
            assert t["expr"].strip(), p["title"]
            assert "fieldConfig" in p and "unit" in p["fieldConfig"]["defaults"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=IDS)
def test_templating(path: Path) -> None:
    d = load(path)
    variables = d["templating"]["list"]
    names = [v["name"] for v in variables]
    assert len(names) == len(set(names))
    first = variables[0]
    assert first["name"] == "datasource" and first["type"] == "datasource" and first["query"] == "prometheus"
    defined: set[str] = set()
    for v in variables:
        if v["type"] == "query":
            assert v["datasource"] == DS, v["name"]
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            assert query == v["definition"]
            assert query.startswith("label_values("), query
            used = {m.group(1) or m.group(2) for m in VAR_RE.finditer(query)}
            assert used <= defined, f"${v['name']} uses later or unknown variables {used - defined}"
            if v.get("includeAll"):
                assert v["allValue"] == ".*"  # an empty label (e.g. no config) must match All
        defined.add(v["name"])
    for title, ref, expr in targets(d):
        used = {m.group(1) or m.group(2) for m in VAR_RE.finditer(expr)}
        assert used <= defined | BUILTINS, f"{title}/{ref}: unknown variables {used - defined - BUILTINS}"


@pytest.mark.parametrize("path", DASHBOARDS, ids=IDS)
def test_expressions_follow_the_conventions(path: Path) -> None:
    d = load(path)
    for title, ref, expr in targets(d):
        where = f"{path.name} {title}/{ref}"
        # engine names in both spellings: prometheus_client >= 0.2x escapes vllm: to vllm_ in OpenMetrics
        assert not re.search(r"\b(vllm|sglang):", expr), f'{where}: use {{__name__=~"vllm[:_]..."}}'
        # windows come from Grafana, never hard-coded
        for window in re.findall(r"\[([^\]]+)\]", expr):
            assert window in (":_", "$__rate_interval", "$__range"), f"{where}: window [{window}]"
        if "vllm" in expr or "sglang" in expr:
            assert 'job=~"$job"' in expr and 'instance=~"$instance"' in expr, where
        if "harness_" in expr:
            assert 'config=~"$config"' in expr and 'run=~"$run"' in expr, where
        if "DCGM_" in expr:
            assert 'instance=~"$gpu_instance"' in expr, where
        assert expr.count("(") == expr.count(")"), where


def _exprs(name: str) -> str:
    return "\n".join(e for _t, _r, e in targets(load(GRAFANA / "dashboards" / name)))


def test_tuning_dashboard_covers_the_record_list() -> None:
    """The guides' record list: client and engine latency, throughput, memory, KV, preemption,
    prefix cache, scheduler, speculative decoding; variables for datasource, engine, model, config."""
    text = _exprs("tuning.json")
    for needle in (
        "harness_ttft_seconds_bucket",
        "harness_itl_seconds_bucket",
        "harness_e2e_seconds_bucket",
        "harness_tpot_seconds_bucket",
        "harness_send_lag_seconds_bucket",
        "vllm[:_]time_to_first_token_seconds_bucket",
        "vllm[:_]inter_token_latency_seconds_bucket",
        "vllm[:_]e2e_request_latency_seconds_bucket",
        "harness_requests_total",
        "harness_input_tokens_total",
        "harness_output_tokens_total",
        "vllm[:_]prompt_tokens_total",
        "vllm[:_]generation_tokens_total",
        "DCGM_FI_DEV_FB_USED",
        "vllm[:_]kv_cache_usage_perc",
        "sglang[:_]token_usage",
        "vllm[:_]num_preemptions_total",
        "vllm[:_]prefix_cache_hits_total",
        "vllm[:_]num_requests_running",
        "vllm[:_]num_requests_waiting",
        "vllm[:_]spec_decode_num_accepted_tokens_total",
        "harness_target_rate_requests_per_second",
        "harness_requests_sent_total",
        "harness_active_users",
        "harness_in_flight_requests",
        "by (le, config)",
    ):
        assert needle in text, needle
    names = [v["name"] for v in load(GRAFANA / "dashboards" / "tuning.json")["templating"]["list"]]
    assert {"datasource", "job", "instance", "model", "config", "run"} <= set(names)


def test_engine_dashboards_use_their_engine_names() -> None:
    vllm, sgl = _exprs("vllm.json"), _exprs("sglang.json")
    assert "sglang" not in vllm and "vllm" not in sgl
    for needle in (
        "kv_cache_usage_perc",
        "prefix_cache_queries_total",
        "num_preemptions_total",
        "request_success_total",
        "spec_decode_num_drafts_total",
        "cache_config_info",
        "request_queue_time_seconds_bucket",
    ):
        assert f"vllm[:_]{needle}" in vllm, needle
    for needle in (
        "token_usage",
        "cache_hit_rate",
        "cached_tokens_total",
        "num_retracted_requests_total",
        "num_queue_reqs",
        "spec_accept_rate",
        "gen_throughput",
        "time_to_first_token_seconds_bucket",
    ):
        assert f"sglang[:_]{needle}" in sgl, needle


def test_harness_names_in_dashboards_are_exported() -> None:
    """Every harness_ name a dashboard uses is one the exporter produces (typos fail here)."""
    from harness.metrics import exporter, exporter_server

    hist = {f"harness_{n}_seconds{s}" for n in exporter.HISTOGRAMS for s in ("_bucket", "_sum", "_count")}
    source = Path(exporter.__file__).read_text() + Path(exporter_server.__file__).read_text()
    used: set[str] = set()
    for path in DASHBOARDS:
        d = load(path)
        for _t, _r, e in targets(d):
            used |= set(re.findall(r"\bharness_\w+", e))
        for _n, q in variable_queries(d):
            used |= set(re.findall(r"\bharness_\w+", q))
    assert used
    for name in used:
        base = name[: -len("_total")] if name.endswith("_total") else name
        assert name in hist or f'"{base}"' in source, (
            f"{name} is not exported by harness/metrics/exporter.py or exporter_server.py"
        )


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_provisioning_files() -> None:
    (ds_file,) = sorted((GRAFANA / "provisioning" / "datasources").glob("*.yaml"))
    ds = _yaml(ds_file)
    assert ds["apiVersion"] == 1
    (prom,) = ds["datasources"]
    assert prom["type"] == "prometheus" and prom["access"] == "proxy" and prom["url"].startswith("http")
    assert prom["jsonData"]["timeInterval"] == "1s"
    (dash_file,) = sorted((GRAFANA / "provisioning" / "dashboards").glob("*.yaml"))
    dp = _yaml(dash_file)
    assert dp["apiVersion"] == 1
    (provider,) = dp["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")
    doc = (ROOT / "docs" / "grafana.md").read_text()
    assert provider["options"]["path"] in doc and "provisioning" in doc


@pytest.mark.skipif(not os.access(PROMTOOL, os.X_OK), reason="promtool not installed")
def test_example_prometheus_config_is_valid() -> None:
    proc = subprocess.run(
        [PROMTOOL, "check", "config", str(GRAFANA / "prometheus.yml")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cfg = _yaml(GRAFANA / "prometheus.yml")
    assert cfg["global"]["scrape_interval"] == "1s"
    assert {j["job_name"] for j in cfg["scrape_configs"]} == {"engine", "harness", "dcgm"}


def _keys(o: Any, path: str = "") -> set[str]:
    if isinstance(o, dict):
        return {f"{path}/{k}" for k in o} | {x for k, v in o.items() for x in _keys(v, f"{path}/{k}")}
    if isinstance(o, list):
        return {x for v in o for x in _keys(v, path + "[]")}
    return set()


@pytest.mark.parametrize("path", DASHBOARDS, ids=IDS)
def test_grafana_foundation_sdk_model_round_trip(path: Path) -> None:
    """Optional: Grafana's own dashboard model (grafana-foundation-sdk) reads every key we write,
    except three its schema leaves out (all valid in Grafana's JSON)."""
    sdk = pytest.importorskip("grafana_foundation_sdk.models.dashboard")
    d = load(path)
    model = sdk.Dashboard.from_json(d)
    assert model.title == d["title"] and len(model.panels) == len(d["panels"])
    back = json.loads(json.dumps(model.to_json(), default=lambda o: o.to_json() if hasattr(o, "to_json") else str(o)))
    lost = _keys(d) - _keys(back)
    assert lost <= {"/annotations/list[]/builtIn", "/id", "/templating/list[]/definition"}, sorted(lost)


def test_tuning_client_panels_follow_the_metric_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric the table shows in Grafana gets its p99 stat, its timeseries and a line of the mean
    panel on the tuning board (grafana/tuning_board.py iterates harness/metrics/table.py)."""
    import dataclasses

    from harness.metrics import table

    monkeypatch.syspath_prepend(str(GRAFANA))
    import tuning_board

    def panels_naming(series: str) -> list[str]:
        return [
            p["title"]
            for p in panels(tuning_board.tuning().to_json())
            if any(series in tgt["expr"] for tgt in p.get("targets", []))
        ]

    before = panels_naming("harness_send_lag_seconds")
    assert before == ["Send lag p99 (client)", "Send lag (open loop)"]  # client health only
    lag = table.BY_NAME["send_lag"]
    shown_lag = dataclasses.replace(lag, places=lag.places | {"grafana"})
    monkeypatch.setattr(table, "METRICS", tuple(shown_lag if m.name == "send_lag" else m for m in table.METRICS))
    after = panels_naming("harness_send_lag_seconds")
    assert set(after) - set(before) == {f"{lag.label} p99 (client)", lag.label, "Mean latency (client)"}
