"""Every file path and every `harness` command and flag that README.md, docs/*.md, scenarios/README.md,
harness/sim/README.md and CONTRIBUTING.md mention exists: a user who copies a command from the docs gets that command, not
"unrecognized arguments"."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from harness.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
DOCS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "scenarios" / "README.md",
    REPO / "harness" / "sim" / "README.md",
    REPO / "CONTRIBUTING.md",
]
#: top-level entries whose paths must exist in the repository
TRACKED_ROOTS = (
    "harness/",
    "docs/",
    "scenarios/",
    "bench/",
    "grafana/",
    "tools/",
    "tests/",
    ".github/",
    ".ci/",
    "results/examples/",
)
#: names a run or sweep directory holds (written by the harness, not files of the repository)
RUN_FILES = {
    "scenario.yaml",
    "summary.json",
    "histograms.json",
    "requests.jsonl",
    "engine_metrics.jsonl",
    "progress.jsonl",
    "report.md",
    "report.html",
    "index.json",
    "summary.csv",
    "sweep.yaml",
    "baseline.json",
    "engine.json",
    "load_plan.json",
    "compare.json",
    "compare.txt",
    "run.sh",
    "load.log",
    "sim.log",
    "tune.json",
    "recommended.yaml",
    "cost.json",
    "startup.json",
    "startup.yaml",
}
#: words under a tracked root that are not paths (a container image)
NOT_PATHS = {"grafana/grafana"}
PLACEHOLDER = re.compile(r"[<>\[\]{}]|\.\.\.|…|\$")
CODE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s#]+)")
PROSE_MD = re.compile(r"(?<![\w/.-])([A-Za-z0-9_][\w./-]*\.md)\b")


def _texts(doc: Path) -> list[str]:
    text = doc.read_text()
    return [m.group(1) for m in CODE.finditer(FENCE.sub("", text))] + [m.group(1) for m in FENCE.finditer(text)]


def _path_refs(doc: Path) -> set[str]:
    text = doc.read_text()
    refs: set[str] = set()
    for chunk in _texts(doc):
        for word in re.split(r"[\s=(),:;'\"]+", chunk):
            word = word.rstrip(".,")
            if (
                not word
                or word.startswith(("http", "-", "/", "~", "*"))
                or PLACEHOLDER.search(word)
                or word in NOT_PATHS
            ):
                continue
            if word.startswith(TRACKED_ROOTS) or (
                re.search(r"\.(ya?ml|md|py|sh|toml)$", word) and "/" not in word and word not in RUN_FILES
            ):
                refs.add(word)
    for m in LINK.finditer(text):
        if not m.group(1).startswith(("http", "mailto:")):
            refs.add(str((doc.parent / m.group(1)).resolve().relative_to(REPO)))
    for m in PROSE_MD.finditer(FENCE.sub("", text)):
        refs.add(m.group(1))
    return refs


def _exists(ref: str) -> bool:
    if "*" in ref:
        return any(REPO.glob(ref))
    if "/" in ref:
        return (REPO / ref).exists()
    return (REPO / ref).exists() or any(
        p for p in REPO.rglob(ref) if ".cache" not in p.parts and "results" not in p.parts[:1]
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_referenced_file_exists(doc: Path) -> None:
    missing = sorted(r for r in _path_refs(doc) if not _exists(r))
    assert not missing, f"{doc.name} names files that are not in the repository: {missing}"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands(doc: Path) -> list[list[str]]:
    """Every `harness ...` invocation, as words, cut at a comment, pipe, `;` or `&&`."""
    out = []
    for chunk in _texts(doc):
        for line in chunk.splitlines():
            for m in re.finditer(r"(?:^|[\s(\"'`$])harness ([^#|;&`\"]*)", line):
                try:
                    words = shlex.split(m.group(1), comments=False)
                except ValueError:
                    words = m.group(1).split()
                if words:
                    out.append(words)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_harness_command_and_flag_exists(doc: Path) -> None:
    top = build_parser()
    commands = _subparsers(top)
    problems = []
    for words in _commands(doc):
        name = words[0]
        if name.startswith("-"):
            if name not in top._option_string_actions:
                problems.append(f"harness {name}")
            continue
        if PLACEHOLDER.search(name) or not re.match(r"^[a-z][a-z-]*$", name):
            continue  # prose such as "harness's"
        if name not in commands:
            problems.append(f"harness {name}: no such command")
            continue
        parser = commands[name]
        actions = _subparsers(parser)
        if actions and len(words) > 1 and words[1] in actions:
            parser = actions[words[1]]
        passthrough = name in ("sim", "ui")  # they pass unknown flags on (engine / Locust flags)
        for word in words[1:]:
            flag = word.lstrip("[").rstrip("]").split("=", 1)[0]
            if (
                flag.startswith("--")
                and len(flag) > 2
                and not PLACEHOLDER.search(flag)
                and flag not in parser._option_string_actions
                and not passthrough
            ):
                problems.append(f"harness {' '.join(words[:2])} ...: {flag} is not a flag of `harness {name}`")
    assert not problems, f"{doc.name}: " + "; ".join(sorted(set(problems)))


def test_grafana_docs_say_why_engine_panels_are_empty_during_a_sweep() -> None:
    """Sweeps start engines on `port: auto`; the example scrape config has a fixed engine port."""
    text = (REPO / "docs" / "grafana.md").read_text()
    assert "engine.port: auto" in text and "engine panels" in text and "port: 8000" in text
    assert '"127.0.0.1:8000"' in (REPO / "grafana" / "prometheus.yml").read_text()
