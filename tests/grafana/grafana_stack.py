"""Helpers for the Grafana tests: dashboard reading, template substitution, a real Prometheus,
a synthetic SGLang + DCGM exposition, and PromQL over HTTP (urllib only)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

#: Grafana's built-in variables that may appear in expressions
BUILTINS = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}
VAR_RE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- dashboards
def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(dash: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows."""
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


def targets(dash: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(panel title, refId, expr) for every Prometheus target."""
    for p in panels(dash):
        for t in p.get("targets", []):
            yield p["title"], t["refId"], t["expr"]


def variable_queries(dash: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]
            yield v["name"], q["query"] if isinstance(q, dict) else q


def substitute(expr: str, values: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr}")
        return values[name]

    return VAR_RE.sub(repl, expr)


# ----------------------------------------------------------------------------- Prometheus
class Prometheus:
    """Debian's prometheus on a free 127.0.0.1 port, temp TSDB, scraping `jobs` every second.

    `jobs`: {job_name: (host:port, metrics_path)}.
    """

    def __init__(self, tmp: Path, jobs: dict[str, tuple[str, str]]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        lines = ["global:", "  scrape_interval: 1s", "  scrape_timeout: 1s", "scrape_configs:"]
        for job, (target, path) in jobs.items():
            lines += [
                f"  - job_name: {job}",
                f"    metrics_path: {path}",
                "    static_configs:",
                f"      - targets: ['{target}']",
            ]
        self.config = tmp / "prometheus.yml"
        self.config.write_text("\n".join(lines) + "\n")
        self.log = tmp / "prometheus.log"
        self._log = open(self.log, "w")
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
        )

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=0.5) as r:
                    return r.status == 200
            except (urllib.error.URLError, OSError):
                return False

        wait_until(ready, "prometheus /-/ready", details=lambda: self.log.read_text()[-2000:])

    def api(self, path: str, params: list[tuple[str, str]]) -> Any:
        data = urllib.parse.urlencode(params).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
            raise AssertionError(f"{path} {params}: HTTP {exc.code}: {body.get('error')}") from None
        assert body["status"] == "success", body
        return body["data"]

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[dict[str, Any]]:
        return self.api(
            "/api/v1/query_range",
            [("query", expr), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"), ("step", str(step))],
        )["result"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = [("query", expr)] + ([("time", f"{at:.3f}")] if at is not None else [])
        return self.api("/api/v1/query", params)["result"]

    def series(self, match: str, start: float, end: float) -> list[dict[str, str]]:
        return self.api("/api/v1/series", [("match[]", match), ("start", f"{start:.3f}"), ("end", f"{end:.3f}")])

    def up(self) -> dict[str, float]:
        return {r["metric"]["job"]: float(r["value"][1]) for r in self.query("up")}

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def finite_points(result: list[dict[str, Any]]) -> int:
    n = 0
    for series in result:
        for _ts, v in series.get("values", []) + ([series["value"]] if "value" in series else []):
            if math.isfinite(float(v)):
                n += 1
    return n


def label_values(prom: Prometheus, query: str, start: float, end: float) -> list[str]:
    """Grafana's `label_values(selector, label)` (or `label_values(label)`) through /api/v1/series."""
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query.strip())
    assert m, f"unsupported variable query {query!r}"
    selector, label = m.group(1), m.group(2)
    return sorted({s[label] for s in prom.series(selector, start, end) if label in s})


# ----------------------------------------------------------------------------- synthetic exporter
class SyntheticExporter:
    """Serves SGLang (`/sglang`) and DCGM (`/dcgm`) pages in the plain text format (colons kept).

    For the signals the simulator cannot produce. Names and labels follow ENGINES.md §3 and
    dcgm-exporter's defaults; counters and histograms grow with time so rates are non-zero.
    """

    MODEL = "synth-sglang"

    def __init__(self) -> None:
        self.t0 = time.time()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                body = {"/sglang": exporter.sglang, "/dcgm": exporter.dcgm}.get(path)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = body().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.address = f"127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def sglang(self) -> str:
        t = time.time() - self.t0 + 1.0
        base = f'model_name="{self.MODEL}",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
        tok = f'model_name="{self.MODEL}",engine_type="unified"'
        out: list[str] = []

        def metric(name: str, typ: str, samples: list[tuple[str, str, float]]) -> None:
            out.append(f"# HELP sglang:{name} synthetic")
            out.append(f"# TYPE sglang:{name} {typ}")
            for suffix, labels, value in samples:
                out.append(f"sglang:{name}{suffix}{{{labels}}} {value}")

        for name, value in {
            "num_running_reqs": 12,
            "num_queue_reqs": 3,
            "num_grammar_queue_reqs": 0,
            "token_usage": 0.42,
            "kv_used_tokens": 42000,
            "kv_available_tokens": 50000,
            "kv_evictable_tokens": 8000,
            "max_total_num_tokens": 100000,
            "cache_hit_rate": 0.37,
            "gen_throughput": 1500.0,
            "num_retracted_reqs": 1,
            "spec_accept_rate": 0.61,
            "spec_accept_length": 2.4,
        }.items():
            metric(name, "gauge", [("", base, value)])
        for name, labels, per_s in (
            ("prompt_tokens_total", tok + ',is_streaming="true"', 4000.0),
            ("generation_tokens_total", tok + ',is_streaming="true"', 1500.0),
            ("num_requests_total", tok + ',is_streaming="true"', 8.0),
            ("cached_tokens_total", tok + ',cache_source="device"', 1500.0),
            ("num_aborted_requests_total", tok, 0.1),
            ("num_retracted_requests_total", base, 0.2),
        ):
            metric(name[: -len("_total")], "counter", [("_total", labels, round(per_s * t, 3))])
        hists = {
            "time_to_first_token_seconds": (0.1, 0.2, 0.4, 0.8, 1.0, 2.0),
            "inter_token_latency_seconds": (0.002, 0.005, 0.01, 0.02, 0.05, 0.1),
            "request_time_per_output_token_seconds": (0.002, 0.005, 0.01, 0.02, 0.05, 0.1),
            "e2e_request_latency_seconds": (0.1, 0.5, 1.0, 2.0, 5.0, 10.0),
            "queue_time_seconds": (0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
        }
        for name, bounds in hists.items():
            n = 8.0 * t
            samples = []
            for i, b in enumerate(bounds):
                samples.append(("_bucket", f'{tok},le="{b}"', round(n * (i + 1) / len(bounds), 3)))
            samples.append(("_bucket", f'{tok},le="+Inf"', round(n, 3)))
            samples.append(("_sum", tok, round(n * bounds[2], 3)))
            samples.append(("_count", tok, round(n, 3)))
            metric(name, "histogram", samples)
        return "\n".join(out) + "\n"

    def dcgm(self) -> str:
        lines = [
            "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).",
            "# TYPE DCGM_FI_DEV_FB_USED gauge",
            "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).",
            "# TYPE DCGM_FI_DEV_FB_FREE gauge",
        ]
        for gpu in range(2):
            labels = f'gpu="{gpu}",UUID="GPU-0000000{gpu}",device="nvidia{gpu}",modelName="NVIDIA H100 80GB HBM3",Hostname="synth"'
            lines.append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {70000 + gpu}")
            lines.append(f"DCGM_FI_DEV_FB_FREE{{{labels}}} {11000 - gpu}")
        return "\n".join(lines) + "\n"


def environ() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("HARNESS_METRICS_DIR", None)
    return env
