"""Which test files the fast suite starts first (tests/conftest.py sorts the collected items)."""

#: the files whose tests take longest (15-35 s each on the shared 2-core box: a module's shared runs,
#: or one long end-to-end test), longest first. They are collected first, so `--dist loadfile`
#: hands them out first and the many short files fill the workers' ends; in collection order
#: (directory names) a 30-s file came last to one worker while the others sat idle.
#: tests/conftest.py sorts the items; tests/test_suite_order.py checks every entry is a test file here.
START_FIRST = (
    "tests/load/test_badserver_modes.py",
    "tests/tune/test_cases_sim.py",
    "tests/quality/test_quality_cli.py",
    "tests/ui/test_web_workers.py",
    "tests/load/test_distributed.py",
    "tests/capacity/test_capacity_sim.py",
    "tests/e2e/test_run_sim.py",
    "tests/metrics/test_exporter.py",
    "tests/telemetry/test_faults.py",
    "tests/test_cli_run_flags.py",
    "tests/ui/test_web.py",
    "tests/e2e/test_run_fake.py",
    "tests/sim/test_sim_faults.py",
    "tests/diagnose/test_sweep_findings.py",
    "tests/results/test_offline_sim.py",
    "tests/sweep/test_replicas_sim.py",
)
