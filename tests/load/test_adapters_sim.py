"""LoRA adapter mixes end to end: harness run against the built-in simulator (which then serves the
scenario's adapters), per-adapter blocks that add up to the run's, cold vs warm adapter requests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from harness.scenario.models import Scenario
from harness.workload.generator import WorkloadGenerator

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "run", *args, "--quiet", "--no-report"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )


def test_adapter_mix_per_adapter_and_cold_loads(tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = _run(
        str(ROOT / "scenarios" / "lora_mix.yaml"),
        "--duration",
        "4",
        "--out",
        str(out),
        "--sim-args=--max-loras 2 --max-cpu-loras 6 --sim-speed 2",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    adapters, loads = s["groups"]["adapter"], s["groups"]["adapter_load"]
    total = s["requests"]["completed"]
    assert sum(b["requests"]["completed"] for b in adapters.values()) == total
    assert sum(b["requests"]["completed"] for b in loads.values()) == total
    # no warmup: every adapter asked for had exactly one cold (first) request
    assert loads["cold"]["requests"]["completed"] == len(adapters) >= 3
    # Zipf: the most popular name is asked for most
    assert max(adapters, key=lambda a: adapters[a]["requests"]["completed"]) == "support-en"
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert Counter(r["labels"]["adapter"] for r in lines if not r["warmup"]) == {
        a: b["requests"]["completed"] for a, b in adapters.items()
    }


def test_adapters_the_target_does_not_serve_are_one_line_errors(tmp_path: Path) -> None:
    p = _run(
        str(ROOT / "scenarios" / "lora_mix.yaml"),
        "--duration",
        "1",
        "--out",
        str(tmp_path / "r"),
        "--sim-args=--enable-lora --lora-modules other=/x",
    )
    assert p.returncode == 2, p.stderr[-2000:]
    assert "workload.adapters: support-en" in p.stderr and "Traceback" not in p.stderr


def test_adapter_choice_is_seeded_and_sessions_keep_theirs() -> None:
    sc = Scenario.model_validate(
        {
            "name": "a",
            "seed": 1,
            "load": {"concurrency": 1, "requests": 1},
            "workload": {
                "adapters": {"names": ["x", "y", "z"], "zipf": 1.0},
                "classes": [
                    {"name": "c", "input_tokens": 8, "output_tokens": 4},
                    {
                        "name": "s",
                        "session": {"turns": 3, "user_tokens": 4, "output_tokens": 2},
                        "adapters": [{"name": "only"}],
                    },
                ],
            },
        }
    )
    g1, g2 = WorkloadGenerator(sc), WorkloadGenerator(sc)
    picks = [g1.request(i) for i in range(3000)]
    assert [p.adapter for p in picks[:50]] == [g2.request(i).adapter for i in range(50)]
    plain = Counter(p.adapter for p in picks if p.class_name == "c")
    share = np.array([plain[n] for n in "xyz"]) / sum(plain.values())
    assert np.allclose(share, np.array([1, 1 / 2, 1 / 3]) / (1 + 1 / 2 + 1 / 3), atol=0.04)
    sess = next(p for p in picks if p.class_name == "s")
    assert sess.adapter == "only"
    conv = sess.session
    conv.complete(" a b", sess.input_tokens, 2, lambda t: len(t.split()))
    assert g1.session_turn(conv).adapter == "only"
    # adding adapters changes no prompt
    bare = Scenario.model_validate({**sc.model_dump(), "workload": {**sc.model_dump()["workload"], "adapters": None}})
    assert WorkloadGenerator(bare).request(7).text == g2.request(7).text
