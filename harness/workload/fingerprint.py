"""Fingerprint of everything that defines the work, so only like is compared with like.

The target (URL, model name, engine) is deliberately left out: comparing two engine configs on
the same work is the point. Each part has its own hash so `compare` can name what differs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harness.scenario.models import Scenario
from harness.workload.arrivals import get_arrival
from harness.workload.builtin_tokenizer import BuiltinTokenizer

#: the run records the tokenizer that sized its prompts; with none given it is the built-in one
DEFAULT_TOKENIZER_ID = BuiltinTokenizer.id

FINGERPRINT_PARTS = ("workload", "sampling", "load", "warmup", "seed", "api")


def _digest(obj: Any) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def fingerprint_parts(
    scenario: Scenario, tokenizer_id: str = DEFAULT_TOKENIZER_ID, base_dir: Path | None = None
) -> dict[str, str]:
    """`base_dir`: where the scenario's relative dataset paths start (the scenario file's folder)."""
    data = scenario.model_dump(mode="json")
    workload = dict(data["workload"])
    # the tokenizer defines the prompts, so its identity (not its path) enters the hash
    workload["tokenizer"] = tokenizer_id
    # the salt changes which words are drawn, never lengths or structure: salted runs are like with like
    workload.pop("prompt_salt", None)
    # the calibration to the target's tokenizer keeps the lengths in the target's tokens what they were
    workload.pop("token_scale", None)
    for cls in workload["classes"]:
        cls.pop("slo", None)  # SLOs judge the work, they do not define it
        if cls.get("dataset"):  # so does a dataset's content, wherever the file lives
            from harness.workload.files import file_id

            cls["dataset"] = {**cls["dataset"], "path": file_id(cls["dataset"]["path"], base_dir, "workload dataset")}
        bt = cls.pop("block_trace", None)  # absent (not null) without one: older fingerprints stay what they were
        if bt:  # a block trace: its content defines the prompts, lengths and arrivals, not where it lives
            from harness.workload.files import file_id

            cls["block_trace"] = {**bt, "path": file_id(bt["path"], base_dir, "workload block_trace")}
        sess = cls.get("session")
        if sess and sess.get("dataset"):  # recorded conversations: their content, not their path
            from harness.workload.files import file_id

            ds = sess["dataset"]
            cls["session"] = {**sess, "dataset": {**ds, "path": file_id(ds["path"], base_dir, "session dataset")}}
    # the arrival pattern says what of its inputs defines the work (a trace's content, not its path)
    load = get_arrival(scenario.load.arrival).fingerprint(dict(data["load"]), base_dir)
    return {
        "workload": _digest(workload),
        "sampling": _digest(data["sampling"]),
        "load": _digest(load),
        "warmup": _digest(data["warmup"]),
        "seed": _digest(data["seed"]),
        "api": _digest(data["target"]["api"]),
    }


def fingerprint(
    scenario: Scenario, tokenizer_id: str = DEFAULT_TOKENIZER_ID, base_dir: Path | None = None
) -> dict[str, Any]:
    parts = fingerprint_parts(scenario, tokenizer_id, base_dir)
    return {"value": _digest(parts), "parts": parts}
