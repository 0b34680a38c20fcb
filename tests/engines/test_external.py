"""Kind external: a server already running; nothing is started, so no command, no flags; ready
and reset paths from the sweep file. A sweep against one: tests/sweep/test_external_sim.py."""

from harness.engines import get_kind
from harness.sweep.models import EngineSpec


def test_attaches_and_reads_paths_from_the_sweep_file():
    ext = get_kind("external")
    spec = EngineSpec(kind="external", url="http://127.0.0.1:9")
    assert not ext.starts_engine and ext.default_command(spec) == []
    assert ext.ready_path_for(spec) == "/v1/models"
    assert ext.ready_path_for(EngineSpec(kind="external", url="http://127.0.0.1:9", ready_path="/health")) == "/health"
    assert ext.reset_prefix_cache("http://127.0.0.1:9", spec).startswith("kind external: engine.reset_path is not set")
