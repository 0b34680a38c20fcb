"""Load and check a tune file: one line per problem with its field path (the CLI exits 2).

Pydantic checks the shape; this module adds what needs the files around it: the workload's
scenario files must exist and validate, and a context length must be known (given, or the
workload's longest request when every length has a maximum: harness.workload.context, the
generator's own rules, so shared prefixes, system prompts, session history and dataset prompts
count, plus the output and a chat-template margin).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.engines import get_kind
from harness.errors import UserError
from harness.scenario.inputs import input_path, not_a_file
from harness.scenario.loader import read_yaml, validate
from harness.scenario.models import Scenario
from harness.tune.models import TuneFile
from harness.workload.context import required_context


@dataclass
class TuneSpec:
    file: TuneFile
    source: Path  # the tune file, resolved
    scenarios: list[Path]  # workload files, resolved
    parsed: list[Scenario]
    max_model_len: int  # required context length
    max_model_len_from: str  # "context.max_model_len" | "the workload's longest input + output"


def load_tune(path: str | Path) -> TuneSpec:
    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"{path}: no such file; give the path of a tune YAML file (shipped ones: scenarios/tune/sim_*.yaml)"
        )
    data = read_yaml(path)
    tune = validate(TuneFile, data, str(path))
    base_dir = path.resolve().parent
    problems: list[str] = []
    scenarios: list[Path] = []
    parsed: list[Scenario] = []
    for i, rel in enumerate(tune.workload):
        p = input_path(base_dir, rel)
        why = not_a_file(p)
        if why is not None:  # /dev/zero read as "no such file" (audit R17)
            problems.append(f"{path}: workload[{i}]: {rel}: {why} (paths are relative to the tune file)")
            continue
        try:
            parsed.append(validate(Scenario, read_yaml(p), f"{path}: workload[{i}] {rel}"))
            scenarios.append(p)
        except UserError as exc:
            problems.extend(exc.lines)
    if len({p.stem for p in scenarios}) != len(scenarios):
        problems.append(f"{path}: workload: two scenario files share a name; give each its own file name")
    for name in tune.candidates:
        if tune.candidates[name] and len(set(map(repr, tune.candidates[name]))) != len(tune.candidates[name]):
            problems.append(f"{path}: candidates.{name}: a value is listed twice")
    # flags are the engine's own: a guide (vLLM) name the kind spells otherwise would reach the engine
    # as written and fail its start (`unrecognized arguments`), so it is refused here with the spelling
    flag_map = get_kind(tune.engine.kind).flags
    for where, names in (("base", tune.base), ("candidates", tune.candidates)):
        for name in names:
            why = flag_map.misspelt(name)
            if why is not None:
                problems.append(f"{path}: {where}.{name}: {why}")
    if tune.budget.max_starts is not None and tune.budget.max_starts < 2:
        problems.append(f"{path}: budget.max_starts: at least 2 (the baseline and the final run)")
    longest, how = None, ""
    if parsed:
        try:
            longest, how = required_context(parsed, [p.parent for p in scenarios])
        except UserError as exc:
            problems.extend(exc.lines)
    if tune.context.max_model_len is not None:
        mml, source = tune.context.max_model_len, "context.max_model_len"
        if longest is not None and longest > mml:
            problems.append(
                f"{path}: context.max_model_len: {mml} is shorter than the workload's longest request "
                f"({longest} tokens: {how}); raise it or shorten the workload"
            )
    elif longest is not None:
        mml, source = longest, f"the workload's longest request: {how}"
    else:
        mml, source = 0, ""
        if parsed and how:
            problems.append(
                f"{path}: context.max_model_len: required ({how}); "
                "set it to the longest prompt + output the service accepts"
            )
    if tune.quality is not None:  # a bad prompts file fails before any start
        from harness.quality.dataset import load_quality_set

        try:
            load_quality_set(tune.quality.prompts, base_dir)
        except UserError as exc:
            problems.extend(f"{path}: {line}" for line in exc.lines)
    if problems:
        raise UserError(*problems)
    return TuneSpec(tune, path.resolve(), scenarios, parsed, mml, source)
