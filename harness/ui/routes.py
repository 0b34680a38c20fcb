"""The web UI's HTTP side: Locust's page extended (LLM tabs, rows), the /llm dashboard, run files.

Flask routes on Locust's own app; every state-changing request passes the guard
(harness.ui.guard): no cross-site POSTs, the form picks only scenarios the CLI allowed, and no
response carries CORS headers (another site's page cannot read the UI).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from harness.metrics.table import shown
from harness.ui.guard import SameOriginOnly, refuse_cross_site
from harness.ui.view import UI_STATS, llm_rows, run_rows

log = logging.getLogger("harness.web")

ASSETS = Path(__file__).with_name("assets")

#: the LLM tab's columns (Locust camel-cases the keys on both sides); metrics from harness.metrics.table
LLM_TABLE = [
    {"key": "cls", "title": "Class"},
    {"key": "requests", "title": "Requests"},
    {"key": "fails", "title": "Fails"},
    {"key": "rps", "title": "Req/s"},
    {"key": "tok_s", "title": "Out tok/s"},
    *(
        {
            "key": f"{m.short}_{p}",
            "title": f"{(m.short or m.name).upper()} {p}" + (f" ({m.ui_unit or m.unit})" if i == 0 else ""),
        }
        for m in shown("ui_table")
        for i, p in enumerate(UI_STATS)
    ),
]
RUN_TABLE = [{"key": "item", "title": "Item"}, {"key": "value", "title": "Value"}]


def install(s: Any, web_ui: Any) -> None:
    """Locust's web UI for RunSession `s`: the LLM tabs, the /llm dashboard, run files, the guard."""
    from flask import Response, abort, jsonify, request, send_from_directory

    base = s.base_path()
    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": "llm"}, {"title": "LLM run", "key": "llm_run"}]
    web_ui.template_args["extended_tables"] = [
        {"key": "llm", "structure": LLM_TABLE},
        {"key": "llm_run", "structure": RUN_TABLE},
    ]
    web_ui.template_args["extended_csv_files"] = [
        {"href": f"{base}/llm", "title": "LLM live dashboard (percentiles from HDR histograms, report link)"},
        {"href": f"{base}/llm/api/live", "title": "LLM live values (JSON)"},
    ]
    app = web_ui.app
    app.wsgi_app = SameOriginOnly(app.wsgi_app)  # reads: same origin only (guard)
    auth = web_ui.auth_required_if_enabled
    loopback_only = _is_loopback_bind(getattr(s.opts, "web_host", "") or "")

    @app.before_request
    def guard() -> Any:
        """No state change from another site's page; the form picks only what the CLI allowed."""
        why = refuse_cross_site(request.method, request.headers, loopback_only)
        if why:
            log.warning("harness: refused %s %s: %s", request.method, request.path, why)
            return jsonify({"success": False, "message": f"refused: {why}"}), 403
        if request.method == "POST" and request.path == f"{base}/swarm":
            lines = s.check_swarm_form(request.form)
            if lines:
                return jsonify({"success": False, "message": "; ".join(lines), "host": s.env.host}), 400
        return None

    @app.route(f"{base}/llm")
    @auth
    def llm_page() -> Any:
        return send_from_directory(ASSETS, "llm.html")

    @app.route(f"{base}/llm/assets/<path:name>")
    @auth
    def llm_assets(name: str) -> Any:
        return send_from_directory(ASSETS, name)

    @app.route(f"{base}/llm/api/live")
    @auth
    def llm_live() -> Any:
        return jsonify(s.view())

    @app.route(f"{base}/llm/runs/<run>/<path:name>")
    @auth
    def llm_run_file(run: str, name: str) -> Any:
        root = s.runs.get(run)
        if root is None:
            abort(404)
        return send_from_directory(root, name)

    @app.after_request
    def add_llm_rows(resp: Response) -> Response:
        if request.path in (f"{base}/", base or "/") and resp.mimetype == "text/html" and not resp.direct_passthrough:
            # Locust's page: its tables render text only; links.js makes the LLM run tab's URLs clickable
            page = resp.get_data(as_text=True)
            if "</body>" in page:
                resp.set_data(page.replace("</body>", f'<script src="{base}/llm/assets/links.js"></script></body>', 1))
            return resp
        if request.path == f"{base}/stats/requests" and resp.mimetype == "application/json":
            try:
                data = json.loads(resp.get_data())
                view = s.view()
                data["extended_stats"] = [
                    {"key": "llm", "data": llm_rows(view)},
                    {"key": "llm_run", "data": run_rows(view, base)},
                ]
                resp.set_data(json.dumps(data))
            except Exception:  # Locust's own page must keep working
                log.exception("harness: could not add the LLM rows")
        return resp


def _is_loopback_bind(host: str) -> bool:
    """Whether the web UI listens on loopback only (then a Host that is not loopback is a rebinding)."""
    import ipaddress

    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # '*', '', a name: reachable from elsewhere, any Host is possible
