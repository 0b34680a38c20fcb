"""harness: a load-generating benchmark harness for LLM serving engines.

Data flow (imports point down this list, never up):
scenario -> workload -> load -> client -> metrics -> telemetry -> results -> report,
with sweep and sim beside them and cli on top. Only harness.load imports Locust/gevent.
"""

__version__ = "0.1.0"
