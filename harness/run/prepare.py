"""Prepare a run: fail early on bad inputs, resolve the target, isolate the prefix cache, fingerprint.

Both `harness run` (harness.run.lifecycle) and the web UI (harness.ui) start a run here, so a run
directory's scenario.yaml, its fingerprint and its prefix-cache isolation mean the same thing
whichever front end made it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.engines import tokenize_for
from harness.load.plan import LoadPlan
from harness.results.layout import RunDir, write_text_atomic
from harness.run.prefix_cache import CacheIsolation, isolate, post_reset
from harness.run.target import _auth_headers, calibrate_tokens, preflight
from harness.scenario.loader import dump_scenario
from harness.scenario.models import Scenario
from harness.workload.arrivals import get_arrival
from harness.workload.fingerprint import fingerprint
from harness.workload.generator import WorkloadGenerator
from harness.workload.tokenizers import load_tokenizer


@dataclass
class Prepared:
    """One run, ready for load: what every later step (load, window, finish) reads."""

    scenario: Scenario  # as it will be sent (salted when the prefix cache could not be reset)
    scenario_dir: Path  # where the scenario's relative paths start
    scenario_path: str | None
    run_dir: RunDir
    tokenizer_id: str
    target_url: str = ""
    engine_kind: str | None = None
    #: preflight's answer (model, continuous_usage) plus prefix_cache_isolation
    info: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] | None = None
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return str(self.info["model"])

    def plan(self, **kw: Any) -> LoadPlan:
        """The load plan for this run (kw: worker, workers, kernel_stamps, stop_grace_s)."""
        s = self.scenario
        return LoadPlan(
            scenario=s.model_dump(mode="json"),
            scenario_dir=str(self.scenario_dir.resolve()),
            target_url=self.target_url,
            model=self.model,
            api_key_env=s.target.api_key_env,
            continuous_usage=self.info["continuous_usage"],
            out_dir=str(self.run_dir.root.resolve()),
            **kw,
        )


def start(
    scenario: Scenario,
    run_dir: RunDir,
    scenario_path: str | None,
    scenario_dir: Path | None = None,
    check_quality: bool = True,
) -> Prepared:
    """Write scenario.yaml and fail early (one line) on a bad tokenizer, dataset, trace or quality file."""
    write_text_atomic(run_dir.scenario, dump_scenario(scenario))
    if scenario_dir is None:
        scenario_dir = Path(scenario_path).parent if scenario_path else Path(".")
    tokenizer = load_tokenizer(scenario.workload.tokenizer, scenario_dir)
    WorkloadGenerator(scenario, tokenizer, scenario_dir)  # a bad dataset file fails here, in one line
    get_arrival(scenario.load.arrival).check(scenario.load, scenario_dir)  # a bad trace file fails here
    if check_quality and scenario.quality is not None:
        from harness.quality.dataset import load_quality_set

        load_quality_set(scenario.quality.prompts, scenario_dir)
    return Prepared(
        scenario=scenario,
        scenario_dir=scenario_dir,
        scenario_path=scenario_path,
        run_dir=run_dir,
        tokenizer_id=tokenizer.id,
    )


def resolve(
    prep: Prepared,
    target_url: str,
    model: str | None,
    engine_kind: str | None,
    *,
    reset_prefix_cache: bool,
    off_reason: str | None = None,
    verbose: bool = False,
    calibrate: bool = True,
) -> Prepared:
    """Preflight the target, size prompts in its tokens (`calibrate`), isolate its prefix cache
    (reset, else salt), fingerprint the work.

    `reset_prefix_cache` False: the cache is left alone ("off", with `off_reason` when the user
    asked for it). A salted or calibrated scenario is rewritten to scenario.yaml."""
    prep.target_url, prep.engine_kind = target_url, engine_kind
    prep.info = preflight(target_url, model, prep.scenario)
    for url in (prep.scenario.target.endpoints or [])[1:]:  # a fleet: every replica answers and serves the model
        preflight(url, prep.model, prep.scenario)
        if reset_prefix_cache:
            post_reset(url, _auth_headers(prep.scenario))
    if calibrate:
        prep.scenario = _calibrate_tokens(prep.scenario, target_url, prep.model, engine_kind, prep.run_dir, verbose)
    scenario = prep.scenario
    if reset_prefix_cache:
        scenario, iso = isolate(scenario, target_url, _auth_headers(scenario), reset=True)
        if iso.mode == "salt":
            write_text_atomic(prep.run_dir.scenario, dump_scenario(scenario))
            if verbose:
                print(
                    f"prefix cache: cannot be reset ({iso.reason}); prompts salted with workload.prompt_salt "
                    f"{iso.salt} (same lengths, other words)",
                    file=sys.stderr,
                )
    else:
        iso = CacheIsolation("off", salt=scenario.workload.prompt_salt, reason=off_reason)
    prep.scenario = scenario
    prep.info["prefix_cache_isolation"] = iso.to_dict()
    prep.fingerprint = fingerprint(scenario, prep.tokenizer_id, prep.scenario_dir)
    return prep


def _calibrate_tokens(
    scenario: Scenario, target_url: str, model: str, engine_kind: str | None, run_dir: RunDir, verbose: bool
) -> Scenario:
    """No tokenizer given: size the built-in prompts in the target's tokens (its POST /tokenize),
    recorded in workload.token_scale (harness.run.target.calibrate_tokens says why)."""
    tokenize = tokenize_for(engine_kind)
    if scenario.workload.tokenizer is not None or scenario.workload.token_scale is not None or tokenize is None:
        return scenario  # no endpoint to ask (the simulated engine counts built-in words exactly)
    scale = calibrate_tokens(target_url, model, scenario, tokenize)
    if scale is None or abs(scale - 1.0) < 0.02:
        return scenario
    scenario = scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"token_scale": scale})})
    write_text_atomic(run_dir.scenario, dump_scenario(scenario))
    if verbose:
        print(
            f"prompt lengths: the target counts {scale:g} tokens per built-in word (POST /tokenize); prompts are "
            "sized in its tokens (workload.token_scale; set workload.tokenizer for exact lengths)",
            file=sys.stderr,
        )
    return scenario
