"""harness: a load-generating benchmark harness for LLM serving engines.

Data flow of one run: a scenario file (harness.scenario) becomes seeded requests and arrival
times (harness.workload); Locust users (harness.load, with the web UI in harness.ui the only
gevent/Locust code) send them through the stamped streaming reader (harness.client); each request's
timings go into HDR histograms (harness.metrics) while the engine's /metrics are scraped over the
measured window (harness.telemetry); the run directory is written and read back as typed models
(harness.results), analysed (harness.diagnose), compared beyond noise (harness.compare) and
rendered (harness.report); a quality gate scores answers beside the load (harness.quality). harness.run is the one run lifecycle; sweeps, capacity searches, startup
timing and tuning (harness.sweep, harness.capacity, harness.startup, harness.tune) drive it, the
command line (harness.cli) sits on top, and the simulated engine (harness.sim) stands beside.
What the harness knows of each kind of serving engine (its launcher, /metrics names, log lines,
flag spellings, cache reset) is one module per kind in harness.engines, at the bottom.

Imports point down the layer list in README.md "Layout" (enforced by import-linter from
pyproject.toml; tests/test_layers.py), CONTRIBUTING.md says how to add to each seam.
"""

__version__ = "0.1.0"
