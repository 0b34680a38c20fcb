"""Scenario files: YAML -> validated models, overrides, fingerprint."""

from harness.scenario.fingerprint import fingerprint
from harness.scenario.loader import dump_scenario, load_scenario
from harness.scenario.models import Scenario

__all__ = ["Scenario", "dump_scenario", "fingerprint", "load_scenario"]
