"""The dashboards' building blocks: selectors, PromQL helpers, template variables and `Board`
(panel layout on Grafana's 24-column grid, JSON in the shape Grafana 10/11 exports).

Kept apart from the boards (tuning_board.py, engine_boards.py) so that each board module is only
what it shows; grafana/generate.py writes them. Stdlib only.
"""

from __future__ import annotations

from typing import Any

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
    def __init__(
        self, uid: str, title: str, description: str, tags: list[str], variables: list[dict[str, Any]]
    ) -> None:
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
        self.panels.append(
            {
                "id": self._next_id(),
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self._y},
                "panels": [],
            }
        )
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

    def panel(
        self,
        kind: str,
        title: str,
        targets: list[dict[str, Any]],
        *,
        w: int = 8,
        hgt: int = 8,
        unit: str = "short",
        description: str = "",
        decimals: int | None = None,
        min_: float | None = None,
        max_: float | None = None,
        stat_calc: str = "lastNotNull",
        thresholds: list[tuple[float | None, str]] | None = None,
    ) -> None:
        refs = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        tlist = []
        for i, t in enumerate(targets):
            tt = {
                "refId": refs[i],
                "datasource": DS,
                "editorMode": "code",
                "expr": t["expr"],
                "legendFormat": t.get("legend", "__auto"),
                "range": not t.get("instant", False),
                "instant": bool(t.get("instant", False)),
            }
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
        p: dict[str, Any] = {
            "id": self._next_id(),
            "type": kind,
            "title": title,
            "description": description,
            "datasource": DS,
            "gridPos": self._place(w, hgt),
            "targets": tlist,
            "fieldConfig": {"defaults": defaults, "overrides": []},
        }
        if kind == "timeseries":
            defaults["color"] = {"mode": "palette-classic"}
            defaults["custom"] = {
                "drawStyle": "line",
                "lineWidth": 1,
                "fillOpacity": 0,
                "showPoints": "never",
                "spanNulls": False,
                "axisPlacement": "auto",
            }
            p["options"] = {
                "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                "tooltip": {"mode": "multi", "sort": "desc"},
            }
        elif kind == "stat":
            defaults["color"] = {"mode": "thresholds"}
            p["options"] = {
                "reduceOptions": {"calcs": [stat_calc], "fields": "", "values": False},
                "colorMode": "value",
                "graphMode": "area",
                "justifyMode": "auto",
                "orientation": "auto",
                "textMode": "auto",
            }
        elif kind == "heatmap":
            p["options"] = {
                "calculate": False,
                "yAxis": {"unit": unit},
                "cellGap": 1,
                "color": {"mode": "scheme", "scheme": "Spectral", "steps": 64},
                "legend": {"show": True},
                "tooltip": {"show": True, "yHistogram": False},
            }
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
            "annotations": {
                "list": [
                    {
                        "builtIn": 1,
                        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                        "enable": True,
                        "hide": True,
                        "iconColor": "rgba(0, 211, 255, 1)",
                        "name": "Annotations & Alerts",
                        "type": "dashboard",
                    }
                ]
            },
            "description": self.description,
            "editable": True,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "id": None,
            "links": [
                {
                    "asDropdown": True,
                    "icon": "external link",
                    "includeVars": True,
                    "keepTime": True,
                    "tags": ["llm-harness"],
                    "targetBlank": False,
                    "title": "LLM harness",
                    "type": "dashboards",
                }
            ],
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
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
    }


def var_query(name: str, label: str, query: str, *, include_all: bool = True, multi: bool = True) -> dict[str, Any]:
    v: dict[str, Any] = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "current": {},
        "hide": 0,
        "includeAll": include_all,
        "multi": multi,
        "options": [],
        "refresh": 2,
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
    }
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


def client_vs_engine(client: str, engine_names: str | None) -> list[dict[str, Any]]:
    """Client quantiles of the harness histogram `client`, beside the engine's (None: none)."""
    out = [t(quantile(q, h(f"{client}_bucket")), f"client {name}") for q, name in QS]
    if engine_names is not None:
        out += [t(quantile(q, eng(engine_names)), f"engine {name}") for q, name in QS]
    return out
