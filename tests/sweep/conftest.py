import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parent
DATA = HERE / "data"
FAKE_ENGINE = HERE / "fake_engine.py"


@pytest.fixture
def write_sweep(tmp_path):
    """write_sweep({...}) -> path of a sweep file in tmp_path next to a copy of tiny.yaml."""
    (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())

    def write(data: dict, name: str = "sweep.yaml") -> Path:
        data = {"scenarios": ["tiny.yaml"], **data}
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


def fake_engine_command(*extra: str) -> list[str]:
    return [sys.executable, str(FAKE_ENGINE), "--port", "{port}", *extra]
