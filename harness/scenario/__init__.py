"""Scenario files: YAML -> validated models, overrides. (The fingerprint, which needs the
workload's tokenizer and file ids, lives one layer up in harness.workload.fingerprint.)"""

from harness.scenario.loader import dump_scenario, load_scenario
from harness.scenario.models import Scenario

__all__ = ["Scenario", "dump_scenario", "load_scenario"]
