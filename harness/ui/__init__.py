"""The web UI: a Locust plugin (Locust's page + /llm dashboard), one run per test.

Above the run lifecycle (harness.run), which it shares with `harness run`; with harness.load the
only package that imports gevent and Locust. Entry: harness/ui/locustfile.py (`harness ui`).
"""
