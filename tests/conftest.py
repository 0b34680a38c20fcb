import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI
from suite_order import START_FIRST

# A suite started in the background by a shell without job control (`cmd &` in a script, nohup)
# inherits SIGINT ignored, and an ignored signal stays ignored across exec: every `harness run`
# the tests start would then ignore their Ctrl-C and the Ctrl-C tests would hang. Python only
# installs its KeyboardInterrupt handler when SIGINT is not ignored at start, as a user's
# `nohup harness run ... &` rightly keeps it; the tests want a terminal's Ctrl-C.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A tune saves its final run as a baseline in $HARNESS_BASELINES, else results/baselines under the
# current directory, which is the checkout: a test that forgot to set it (the transformers tune
# stand-in) left a baseline in the repo that a commit then picked up. Every test and every
# `harness` it starts uses a throwaway store unless the test sets its own.
_BASELINES = None
if "HARNESS_BASELINES" not in os.environ:
    _BASELINES = os.environ["HARNESS_BASELINES"] = tempfile.mkdtemp(prefix="harness-test-baselines-")

# The suite starts ~500 Python processes (xdist workers, `harness run`s, their load processes and
# simulated engines), and each imports 100-300 modules. With PYTHONDONTWRITEBYTECODE set (as on the
# shared CI box), no bytecode of the checkout is ever cached, so every one of them compiled the
# harness from source again: 0.06 (a simulated engine) to 0.17 CPU-s (a `harness run`) each. The
# suite's processes share one throwaway bytecode cache instead (PYTHONPYCACHEPREFIX, a temp
# directory, removed at the end): still nothing is written beside the sources or into
# site-packages. Set in the controller before xdist starts its workers, so they and every process
# they start inherit it.
_PYCACHE = None
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    _PYCACHE = tempfile.mkdtemp(prefix="harness-test-pycache-")
    os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE
    del os.environ["PYTHONDONTWRITEBYTECODE"]


def pytest_unconfigure(config: pytest.Config) -> None:
    # removed by the process that made it (the controller; its xdist workers inherit both)
    for made in (_PYCACHE, _BASELINES):
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = {path: k for k, path in enumerate(START_FIRST)}
    # a stable sort: the other files, and the tests within each file, keep their order
    items.sort(key=lambda item: first.get(item.nodeid.split("::", 1)[0], len(first)))


def _readers() -> list:
    from harness.client.http_stream import native_available

    skip = pytest.mark.skip(reason="the native reader was not built here (no C compiler at install time)")
    return ["python", pytest.param("native", marks=() if native_available() else skip)]


@pytest.fixture(params=_readers())
def reader(request, monkeypatch):
    """Run a test under each stream reader: this process's (http_stream.READER) and the
    subprocesses' it starts ($HARNESS_READER). Use it with `pytestmark = usefixtures("reader")`."""
    from harness.client import http_stream

    monkeypatch.setattr(http_stream, "READER", request.param)
    monkeypatch.setenv("HARNESS_READER", request.param)
    return request.param


@pytest.fixture(scope="session")
def fake_openai():
    server = FakeOpenAI().start()
    yield server
    server.stop()
