import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI  # noqa: E402

# A suite started in the background by a shell without job control (`cmd &` in a script, nohup)
# inherits SIGINT ignored, and an ignored signal stays ignored across exec: every `harness run`
# the tests start would then ignore their Ctrl-C and the Ctrl-C tests would hang. Python only
# installs its KeyboardInterrupt handler when SIGINT is not ignored at start, as a user's
# `nohup harness run ... &` rightly keeps it; the tests want a terminal's Ctrl-C.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def fake_openai():
    server = FakeOpenAI().start()
    yield server
    server.stop()
