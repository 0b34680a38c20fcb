"""Plan expansion: one-at-a-time, grid, list, linked values, ids, validation, --plan output."""

import pytest

from harness.cli.main import main
from harness.errors import UserError
from harness.sweep.plan import build_plan

SIM = {"kind": "sim"}


def ids(plan):
    return [c.id for c in plan.configs]


def test_one_at_a_time_around_base(write_sweep):
    plan = build_plan(write_sweep({
        "name": "s", "engine": SIM,
        "base": {"max-num-seqs": 8, "max-num-batched-tokens": 512},
        "vary": {"flags": {"max-num-seqs": [4, 8, 16], "max-num-batched-tokens": [256, 1024]}},
    }))
    # the base config first; a value equal to base's is the base config, not a second run
    assert ids(plan) == ["base", "max-num-seqs=4", "max-num-seqs=16", "max-num-batched-tokens=256", "max-num-batched-tokens=1024"]
    by_id = {c.id: c for c in plan.configs}
    assert by_id["max-num-seqs=16"].flags == {"max-num-seqs": 16, "max-num-batched-tokens": 512}
    assert by_id["max-num-seqs=16"].varied == {"max-num-seqs": 16}
    assert by_id["base"].varied == {}


def test_include_base_false(write_sweep):
    plan = build_plan(write_sweep({"name": "s", "engine": SIM, "vary": {"flags": {"max-num-seqs": [4, 8]}, "include_base": False}}))
    assert ids(plan) == ["max-num-seqs=4", "max-num-seqs=8"]


def test_grid(write_sweep):
    plan = build_plan(write_sweep({
        "name": "s", "engine": SIM,
        "vary": {"mode": "grid", "flags": {"max-num-seqs": [4, 8], "enable-prefix-caching": [True, False]}},
    }))
    assert ids(plan) == [
        "max-num-seqs=4,enable-prefix-caching=true", "max-num-seqs=4,enable-prefix-caching=false",
        "max-num-seqs=8,enable-prefix-caching=true", "max-num-seqs=8,enable-prefix-caching=false",
    ]
    assert len(plan.cells) == 4


def test_list_with_ids_and_overrides(write_sweep):
    plan = build_plan(write_sweep({
        "name": "s", "engine": SIM, "base": {"max-num-seqs": 8},
        "vary": {"mode": "list", "configs": [
            {"id": "default"},
            {"id": "eager", "flags": {"enforce-eager": True}, "overrides": {"load.requests": 3}},
            {"flags": {"speculative-config": {"method": "ngram"}}},
        ]},
    }))
    assert ids(plan) == ["default", "eager", 'speculative-config=method-ngram']
    eager = plan.cells_of(plan.configs[1])[0]
    assert eager.resolved.load.requests == 3
    assert plan.command(plan.configs[1], 1234)[-5:] == ["--port", "1234", "--max-num-seqs", "8", "--enforce-eager"]


def test_linked_override_follows_the_flag(write_sweep):
    plan = build_plan(write_sweep({
        "name": "s", "engine": SIM, "base": {"max-num-seqs": 8},
        "vary": {"flags": {"max-num-seqs": [4, 16], "max-num-batched-tokens": [256]}, "link": {"load.concurrency": "max-num-seqs"}},
        "repeats": 2,
    }))
    conc = {c.id: c.resolved.load.concurrency for c in plan.cells}
    assert conc == {
        "base__tiny__r1": 8, "base__tiny__r2": 8,
        "max-num-seqs=4__tiny__r1": 4, "max-num-seqs=4__tiny__r2": 4,
        "max-num-seqs=16__tiny__r1": 16, "max-num-seqs=16__tiny__r2": 16,
        # a config that does not vary max-num-seqs keeps base's value for the link
        "max-num-batched-tokens=256__tiny__r1": 8, "max-num-batched-tokens=256__tiny__r2": 8,
    }


def test_link_to_rate_clears_concurrency(write_sweep):
    plan = build_plan(write_sweep({"name": "s", "engine": SIM, "vary": {"flags": {"x": [2]}, "include_base": False, "link": {"load.rate": "x"}}}))
    load = plan.cells[0].resolved.load
    assert load.rate == 2 and load.concurrency is None


def test_command_default_and_placeholders(write_sweep):
    plan = build_plan(write_sweep({
        "name": "s",
        "engine": {"kind": "vllm", "model": "/m", "port": 8123},
        "base": {"max-model-len": 2048, "enable-prefix-caching": False},
    }))
    assert plan.command(plan.configs[0]) == [
        "vllm", "serve", "/m", "--host", "127.0.0.1", "--port", "8123", "--max-model-len", "2048", "--no-enable-prefix-caching",
    ]


def test_cold_start_one_start_per_cell(write_sweep):
    plan = build_plan(write_sweep({"name": "s", "engine": SIM, "vary": {"flags": {"x": [1, 2]}}, "repeats": 2, "cold_start": True}))
    assert len(plan.engine_starts()) == 6
    plan = build_plan(write_sweep({"name": "s", "engine": SIM, "vary": {"flags": {"x": [1, 2]}}, "repeats": 2}))
    assert len(plan.engine_starts()) == 3


@pytest.mark.parametrize("data, expected", [
    ({"name": "s", "engine": {"kind": "nope"}}, "engine.kind: must be 'vllm'"),
    ({"name": "s", "engine": SIM, "bogus": 1}, "bogus: unknown key"),
    ({"name": "s", "engine": SIM, "vary": {"mode": "grid"}}, "vary: mode grid needs flags"),
    ({"name": "s", "engine": {"kind": "custom"}}, "engine: kind custom needs a command"),
    ({"name": "s", "engine": SIM, "vary": {"flags": {"x": [1]}, "link": {"load.concurrency": "y"}}}, "vary.link.load.concurrency: no config sets flag 'y'"),
    ({"name": "s", "engine": SIM, "scenarios": ["missing.yaml"]}, "scenarios[0]: missing.yaml: no such file"),
    ({"name": "s", "engine": SIM, "overrides": {"load.concurrency": -1}}, "load.concurrency: must be greater than 0"),
    ({"name": "s", "engine": {"kind": "vllm"}}, "engine.model: required, the default vllm command uses {model}"),
])
def test_bad_sweep_files_are_one_line_errors(write_sweep, data, expected):
    with pytest.raises(UserError) as exc:
        build_plan(write_sweep(data))
    assert any(expected in line for line in exc.value.lines), exc.value.lines


def test_cli_plan_prints_every_step_and_starts_nothing(write_sweep, capsys, tmp_path):
    path = write_sweep({
        "name": "s", "engine": {"kind": "vllm", "model": "/m"},
        "vary": {"flags": {"max-num-seqs": [4, 8]}}, "repeats": 2,
    })
    assert main(["sweep", str(path), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "3 config(s) x 1 scenario(s) x 2 repeat(s) = 6 cell(s), 3 engine start(s)" in out
    assert out.count("  step ") == 6
    assert "$ vllm serve /m --host 127.0.0.1 --port '{port}' --max-num-seqs 8" in out
    assert "VLLM_SERVER_DEV_MODE=1" in out
    assert not (tmp_path / "results").exists()


def test_cli_bad_file_exit_2(write_sweep, capsys):
    path = write_sweep({"name": "s", "engine": SIM, "repeats": 0})
    assert main(["sweep", str(path), "--plan"]) == 2
    assert "repeats: must be greater than or equal to 1" in capsys.readouterr().err
