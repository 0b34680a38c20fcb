import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI  # noqa: E402


@pytest.fixture(scope="session")
def fake_openai():
    server = FakeOpenAI().start()
    yield server
    server.stop()
