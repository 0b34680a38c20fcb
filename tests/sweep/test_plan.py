"""Plan expansion: one-at-a-time, grid, list, linked values, ids, validation, --plan output."""

import pytest

from harness.cli.main import main
from harness.errors import UserError
from harness.sweep.plan import build_plan

SIM = {"kind": "sim"}


def ids(plan):
    return [c.id for c in plan.configs]


def test_one_at_a_time_around_base(write_sweep):
    plan = build_plan(
        write_sweep(
            {
                "name": "s",
                "engine": SIM,
                "base": {"max-num-seqs": 8, "max-num-batched-tokens": 512},
                "vary": {"flags": {"max-num-seqs": [4, 8, 16], "max-num-batched-tokens": [256, 1024]}},
            }
        )
    )
    # the base config first; a value equal to base's is the base config, not a second run
    assert ids(plan) == [
        "base",
        "max-num-seqs=4",
        "max-num-seqs=16",
        "max-num-batched-tokens=256",
        "max-num-batched-tokens=1024",
    ]
    by_id = {c.id: c for c in plan.configs}
    assert by_id["max-num-seqs=16"].flags == {"max-num-seqs": 16, "max-num-batched-tokens": 512}
    assert by_id["max-num-seqs=16"].varied == {"max-num-seqs": 16}
    assert by_id["base"].varied == {}


def test_include_base_false(write_sweep):
    plan = build_plan(
        write_sweep({"name": "s", "engine": SIM, "vary": {"flags": {"max-num-seqs": [4, 8]}, "include_base": False}})
    )
    assert ids(plan) == ["max-num-seqs=4", "max-num-seqs=8"]


def test_grid(write_sweep):
    plan = build_plan(
        write_sweep(
            {
                "name": "s",
                "engine": SIM,
                "vary": {"mode": "grid", "flags": {"max-num-seqs": [4, 8], "enable-prefix-caching": [True, False]}},
            }
        )
    )
    # '+' joins the flags: an id is one argument to `harness compare`, which reads ',' as a list
    assert ids(plan) == [
        "max-num-seqs=4+enable-prefix-caching=true",
        "max-num-seqs=4+enable-prefix-caching=false",
        "max-num-seqs=8+enable-prefix-caching=true",
        "max-num-seqs=8+enable-prefix-caching=false",
    ]
    assert len(plan.cells) == 4


def test_list_with_ids_and_overrides(write_sweep):
    plan = build_plan(
        write_sweep(
            {
                "name": "s",
                "engine": SIM,
                "base": {"max-num-seqs": 8},
                "vary": {
                    "mode": "list",
                    "configs": [
                        {"id": "default"},
                        {"id": "eager", "flags": {"enforce-eager": True}, "overrides": {"load.requests": 3}},
                        {"flags": {"speculative-config": {"method": "ngram"}}},
                    ],
                },
            }
        )
    )
    assert ids(plan) == ["default", "eager", "speculative-config=method-ngram"]
    eager = plan.cells_of(plan.configs[1])[0]
    assert eager.resolved.load.requests == 3
    assert plan.command(plan.configs[1], 1234)[-5:] == ["--port", "1234", "--max-num-seqs", "8", "--enforce-eager"]


def test_a_null_in_a_files_overrides_unsets_the_field(write_sweep):
    """`overrides: {workload.tokenizer: null}` was dropped (a None override reads as a CLI flag left
    out): the cells kept the scenario's tokenizer. A written null is the field's default."""
    path = write_sweep(
        {
            "name": "s",
            "engine": SIM,
            "overrides": {"slo.ttft_ms": None},
            "vary": {
                "mode": "list",
                "configs": [
                    {"id": "theirs"},
                    {"id": "words", "overrides": {"workload.tokenizer": None}},
                ],
            },
        }
    )
    scenario = path.parent / "tiny.yaml"
    scenario.write_text(scenario.read_text().replace("workload:\n", "workload:\n  tokenizer: tok/tokenizer.json\n"))
    plan = build_plan(path)
    theirs, words = (plan.cells_of(c)[0].resolved for c in plan.configs)
    assert theirs.workload.tokenizer == "tok/tokenizer.json" and words.workload.tokenizer is None
    assert theirs.slo.ttft_ms is None and words.slo.ttft_ms is None  # tiny.yaml's 2000 ms unset


def test_linked_override_follows_the_flag(write_sweep):
    plan = build_plan(
        write_sweep(
            {
                "name": "s",
                "engine": SIM,
                "base": {"max-num-seqs": 8},
                "vary": {
                    "flags": {"max-num-seqs": [4, 16], "max-num-batched-tokens": [256]},
                    "link": {"load.concurrency": "max-num-seqs"},
                },
                "repeats": 2,
            }
        )
    )
    conc = {c.id: c.resolved.load.concurrency for c in plan.cells}
    assert conc == {
        "base__tiny__r1": 8,
        "base__tiny__r2": 8,
        "max-num-seqs=4__tiny__r1": 4,
        "max-num-seqs=4__tiny__r2": 4,
        "max-num-seqs=16__tiny__r1": 16,
        "max-num-seqs=16__tiny__r2": 16,
        # a config that does not vary max-num-seqs keeps base's value for the link
        "max-num-batched-tokens=256__tiny__r1": 8,
        "max-num-batched-tokens=256__tiny__r2": 8,
    }


def test_link_to_rate_clears_concurrency(write_sweep):
    plan = build_plan(
        write_sweep(
            {
                "name": "s",
                "engine": SIM,
                "vary": {"flags": {"x": [2]}, "include_base": False, "link": {"load.rate": "x"}},
            }
        )
    )
    load = plan.cells[0].resolved.load
    assert load.rate == 2 and load.concurrency is None


def test_command_default_and_placeholders(write_sweep):
    plan = build_plan(
        write_sweep(
            {
                "name": "s",
                "engine": {"kind": "vllm", "model": "/m", "port": 8123},
                "base": {"max-model-len": 2048, "enable-prefix-caching": False},
            }
        )
    )
    assert plan.command(plan.configs[0]) == [
        "vllm",
        "serve",
        "/m",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--max-model-len",
        "2048",
        "--no-enable-prefix-caching",
    ]


def test_cold_start_one_start_per_cell(write_sweep):
    plan = build_plan(
        write_sweep({"name": "s", "engine": SIM, "vary": {"flags": {"x": [1, 2]}}, "repeats": 2, "cold_start": True})
    )
    assert len(plan.engine_starts()) == 6
    plan = build_plan(write_sweep({"name": "s", "engine": SIM, "vary": {"flags": {"x": [1, 2]}}, "repeats": 2}))
    assert len(plan.engine_starts()) == 3


@pytest.mark.parametrize(
    "data, expected",
    [
        ({"name": "s", "engine": {"kind": "nope"}}, "engine.kind: must be 'vllm'"),
        ({"name": "s", "engine": SIM, "bogus": 1}, "bogus: unknown key"),
        ({"name": "s", "engine": SIM, "vary": {"mode": "grid"}}, "vary: mode grid needs flags"),
        ({"name": "s", "engine": {"kind": "custom"}}, "engine: kind custom needs a command"),
        (
            {"name": "s", "engine": SIM, "vary": {"flags": {"x": [1]}, "link": {"load.concurrency": "y"}}},
            "vary.link.load.concurrency: no config sets flag 'y'",
        ),
        ({"name": "s", "engine": SIM, "scenarios": ["missing.yaml"]}, "scenarios[0]: missing.yaml: no such file"),
        (
            {"name": "s", "engine": SIM, "overrides": {"load.concurrency": -1}},
            "load.concurrency: must be greater than 0",
        ),
        ({"name": "s", "engine": {"kind": "vllm"}}, "engine.model: required, the default vllm command uses {model}"),
        (
            {"name": "s", "engine": SIM, "loads": {"load.requests": [1, 2]}},
            "loads: 'load.requests' is not a load level; use load.concurrency or load.rate",
        ),
        (
            {"name": "s", "engine": SIM, "loads": {"load.concurrency": [1], "load.rate": [2]}},
            "loads: vary one load dimension",
        ),
        (
            {"name": "s", "engine": {"kind": "external"}},
            "engine: kind external needs url: the running server's base URL",
        ),
        (
            {"name": "s", "engine": {"kind": "external", "url": "http://h:8000", "command": ["x", "{port}"]}},
            "kind external starts nothing; remove command",
        ),
        ({"name": "s", "engine": {"kind": "sim", "url": "http://h:8000"}}, "url is for kind external"),
        (
            {
                "name": "s",
                "engine": {"kind": "external", "url": "http://h:8000"},
                "vary": {"flags": {"max-num-seqs": [4]}},
            },
            "vary: kind external cannot change engine flags (max-num-seqs=4)",
        ),
        (
            {"name": "s", "engine": {"kind": "external", "url": "http://h:8000"}, "base": {"max-num-seqs": 4}},
            "base: kind external starts nothing",
        ),
        (
            {"name": "s", "engine": SIM, "loads": {"load.concurrency": [1, 2.5]}},
            "load.concurrency levels are whole numbers",
        ),
        ({"name": "s", "engine": SIM, "loads": {"load.rate": [2, 2]}}, "load.rate: a level is listed twice"),
        ({"name": "s", "engine": SIM, "loads": {"load.rate": [0]}}, "greater than 0"),
        (
            {"name": "s", "engine": SIM, "loads": {"load.rate": [1]}, "overrides": {"load.concurrency": 4}},
            "loads.load.rate: overrides.load.concurrency sets the load too; keep one of them",
        ),
        (
            {
                "name": "s",
                "engine": SIM,
                "loads": {"load.concurrency": [1]},
                "base": {"max-num-seqs": 8},
                "vary": {"flags": {"max-num-seqs": [4]}, "link": {"load.concurrency": "max-num-seqs"}},
            },
            "vary.link.load.concurrency (from flag max-num-seqs) sets the load too",
        ),
    ],
)
def test_bad_sweep_files_are_one_line_errors(write_sweep, data, expected):
    with pytest.raises(UserError) as exc:
        build_plan(write_sweep(data))
    assert any(expected in line for line in exc.value.lines), exc.value.lines


def test_cli_plan_prints_every_step_and_starts_nothing(write_sweep, capsys, tmp_path):
    path = write_sweep(
        {
            "name": "s",
            "engine": {"kind": "vllm", "model": "/m"},
            "vary": {"flags": {"max-num-seqs": [4, 8]}},
            "repeats": 2,
        }
    )
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


def test_load_levels_run_on_one_engine_per_config(write_sweep, capsys):
    """`loads` steps the client's load on the engine already up: configs x levels cells, one start
    per config, level in the cell id, the other load mode cleared (rate replaces concurrency)."""
    path = write_sweep(
        {
            "name": "s",
            "engine": SIM,
            "vary": {"flags": {"max-num-seqs": [4, 8]}, "include_base": False},
            "loads": {"load.rate": [1, 2.5, 10]},
            "repeats": 2,
        }
    )
    plan = build_plan(path)
    assert len(plan.engine_starts()) == 2 and len(plan.cells) == 2 * 3 * 2
    first = plan.cells_of(plan.configs[0])
    assert [c.id for c in first] == [
        "max-num-seqs=4__tiny__rate=1__r1",
        "max-num-seqs=4__tiny__rate=1__r2",
        "max-num-seqs=4__tiny__rate=2.5__r1",
        "max-num-seqs=4__tiny__rate=2.5__r2",
        "max-num-seqs=4__tiny__rate=10__r1",
        "max-num-seqs=4__tiny__rate=10__r2",
    ]
    assert [(c.resolved.load.rate, c.resolved.load.concurrency) for c in first[::2]] == [
        (1, None),
        (2.5, None),
        (10, None),
    ]
    assert first[2].what == "tiny @ rate=2.5" and first[2].overrides["load.rate"] == 2.5

    assert main(["sweep", str(path), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "2 config(s) x 1 scenario(s) x 3 load level(s) x 2 repeat(s) = 12 cell(s), 2 engine start(s)" in out
    assert "load levels: load.rate = 1, 2.5, 10, in this order on the same engine" in out
    assert "step 3: tiny @ rate=2.5 r1 (rate 2.5/s" in out


def test_concurrency_levels_are_whole_users(write_sweep):
    plan = build_plan(write_sweep({"name": "s", "engine": SIM, "loads": {"load.concurrency": [1, 16]}}))
    assert [c.resolved.load.concurrency for c in plan.cells] == [1, 16]
    assert [c.id for c in plan.cells] == ["base__tiny__concurrency=1__r1", "base__tiny__concurrency=16__r1"]


def test_a_nul_in_engine_env_is_refused_and_a_newline_in_a_flag_stays_on_its_plan_line(write_sweep) -> None:
    """Audit R18: a NUL in engine.env passed --plan, then every cell failed `ValueError: embedded
    null byte`. Audit R20: a newline in a flag value broke the `[start n/N] config ...` line in two."""
    from harness.errors import UserError
    from harness.sweep.plan import build_plan
    from harness.sweep.render import render_plan

    with pytest.raises(UserError) as err:
        build_plan(
            write_sweep(
                {"name": "s", "engine": {"kind": "sim", "env": {"A": "x\0y"}}, "vary": {"flags": {"max-num-seqs": [4]}}}
            )
        )
    assert len(err.value.lines) == 1 and "engine.env: env A: the value holds a NUL byte" in err.value.lines[0]
    text = render_plan(
        build_plan(
            write_sweep({"name": "s", "engine": {"kind": "sim"}, "vary": {"flags": {"served-model-name": ["a\nb"]}}})
        )
    )
    assert "config served-model-name=a_b: served-model-name=a\\nb\n" in text


def test_a_long_config_id_is_cut_at_a_flag_boundary_and_stays_unique() -> None:
    """The H200 tune's id read "...+gpu-memory-utilization=0.-44958499": cut inside a value, it
    named a value of 0. Ids are cut before the first flag that does not fit, name the rest
    "+more", and two sets that differ only past the cut still get different ids."""
    from harness.sweep.plan import MAX_ID, _safe_id

    flags = "kv-cache-memory-bytes=2147483648,max-model-len=8192,gpu-memory-utilization=0.85,max-num-batched-tokens="
    a, b = _safe_id(flags + "512"), _safe_id(flags + "2048")
    assert a != b and len(a) <= MAX_ID and len(b) <= MAX_ID
    assert a.startswith("kv-cache-memory-bytes=2147483648+max-model-len=8192+") and "+more-" in a
    head = a.rsplit("+more-", 1)[0]
    assert all("=" in part and part.split("=", 1)[1] for part in head.split("+")), head  # whole flags only
