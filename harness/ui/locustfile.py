"""The harness as a Locust plugin: Locust's web UI (or headless Locust) with per-token LLM metrics.

    harness ui scenarios/mixed.yaml                          # the same, with defaults chosen for you
    locust -f harness/ui/locustfile.py --scenario scenarios/mixed.yaml
    locust -f harness/ui/locustfile.py --scenario S --processes 4        # 4 local worker processes
    locust -f harness/ui/locustfile.py --scenario S --master             # + `harness worker --master-host H`
    locust -f harness/ui/locustfile.py --scenario S --headless -t 60s    # one run directory, then exit

No --host: the built-in simulated engine is started. Each test writes a run directory under
results/ (summary.json, histograms.json, requests.jsonl, report). The LLM tabs and the /llm
dashboard show TTFT, ITL, TPOT percentiles from HDR histograms while the test runs.

Importing this file never fails for want of a scenario: without one the plugin says how to give it.
"""

from __future__ import annotations

from locust import events

from harness.load.user import LLMUser
from harness.ui import final_csv, plugin

__all__ = ["LLMUser"]  # the user class Locust runs (one per stream; the plan decides what it sends)

events.init_command_line_parser.add_listener(plugin.add_arguments)
events.init.add_listener(plugin.on_init)
final_csv.install()  # --csv files end on the test's final counts, not on its last 1-s tick
