"""What Locust's own statistics (its UI header, charts, CSV) get from the harness."""

from __future__ import annotations

import json
import subprocess
import sys

# Locust monkey-patches the process that imports it: run it in a child process.
SCRIPT = """
import json
from locust.env import Environment
from harness.load.user import locust_reporter
from harness.metrics.record import RequestRecord

env = Environment()
env.create_local_runner()
report = locust_reporter(env)
for i in range(10):
    rec = RequestRecord(index=i, class_name="chat", sent_ns=0)
    rec.chunk_ns, rec.chunk_tokens, rec.output_tokens = [5_000_000, 9_000_000], [1, 1], 2
    report(rec)
warm = RequestRecord(index=99, class_name="chat", sent_ns=0, warmup=True)
warm.chunk_ns, warm.chunk_tokens, warm.output_tokens = [5_000_000], [1], 1
report(warm)  # not measured: not in Locust's Aggregated row, RPS or CSV (audit N16)
for i in range(3):  # a server that echoes a request id: one error entry, not one per request
    bad = RequestRecord(index=10 + i, class_name="chat", sent_ns=0)
    bad.error_kind, bad.error_detail = "http_5xx", f"boom for request {1000 + i}"
    report(bad)
print(json.dumps({"total": env.stats.total.num_requests, "failures": env.stats.total.num_failures,
                  "entries": {name: e.num_requests for (name, _), e in env.stats.entries.items()},
                  "errors": {str(e.error): e.occurrences for e in env.stats.errors.values()}}))
"""


def test_one_locust_request_per_llm_request():
    """Audit D13: a TTFT and an E2E event per request doubled Locust's RPS (18 vs 8 req/s)."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True).stdout
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["total"] == 13 and stats["failures"] == 3, stats
    assert stats["entries"] == {"chat e2e": 13}, stats
    assert stats["errors"] == {"http_5xx: boom for request N": 3}, stats
