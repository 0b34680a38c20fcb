"""Imports point down the documented layer list (README.md "Layout"), checked by import-linter.

The contracts live in pyproject.toml ([tool.importlinter]): the layers, "only harness.load
imports gevent and Locust", the simulated engine beside the harness, the foundation modules.
Function-level and TYPE_CHECKING imports count too. The README block must name the same layers
in the same order, so the documentation cannot drift from what is enforced.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return [[m.strip() for m in re.split(r"[|:]", layer)] for layer in contract["layers"]]


def test_import_contracts_hold() -> None:
    """Runs lint-imports on this tree (PYTHONPATH first, so a worktree is checked, not the install)."""
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    proc = subprocess.run(
        [sys.executable, "-c", code, "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_readme_layout_names_the_enforced_layers_in_order() -> None:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    named = []
    for line in block.splitlines():
        m = re.match(r"harness/(\w+)(\.py)?\s", line)
        if m and not line.startswith("harness/errors.py"):
            named.append(f"harness.{m.group(1)}")
    enforced = [m for layer in _layers() for m in layer]
    in_readme = [n for n in named if n in enforced]
    assert in_readme == enforced, f"README layout {in_readme} != pyproject layers {enforced}"
    assert set(named) - set(enforced) == {"harness.sim"}, "a README package the contracts do not place"


def test_every_package_is_placed() -> None:
    """A new package must be given a layer (or be declared beside/foundation) before it lands."""
    placed = {m.split(".")[1] for layer in _layers() for m in layer} | {
        "sim",
        "errors",
        "limits",
        "registry",
        "signals",
    }
    found = {p.name for p in (ROOT / "harness").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    found |= {p.stem for p in (ROOT / "harness").glob("*.py") if p.stem != "__init__"}
    assert found <= placed, (
        f"not in the layer list (pyproject [tool.importlinter], README Layout): {sorted(found - placed)}"
    )


def test_package_docstring_tells_every_package() -> None:
    """harness/__init__.py's data-flow paragraph names every package and no package that is gone."""
    import harness

    named = set(re.findall(r"harness\.(\w+)", harness.__doc__ or ""))
    packages = {p.name for p in (ROOT / "harness").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert named == packages, (
        f"harness/__init__.py names {sorted(named - packages)} (gone), lacks {sorted(packages - named)}"
    )
