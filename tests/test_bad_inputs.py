"""Bad inputs, one row each: scenario files (`harness run F`), sweep files (`harness sweep F --plan`)
and `harness run` flags. Every row must end with exit 2 and `error:` lines only (no traceback, no
"internal error"), one of which names the field or flag at fault.

The rows rebuild the audit's groups 1a-1c (`shared/audits/2026-12-01/reliability.md`; the ids
are its case ids). Rows that need a misbehaving server or a whole run live elsewhere
(tests/load, tests/client); rows whose input is valid (a 39-digit seed, a 50 MB description,
`--duration 3s`) are not bad inputs and are not here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.cli.main import main

OK_CLASS = "    - {name: a, input_tokens: 16, output_tokens: 8}\n"
OK_WORKLOAD = "workload:\n  classes:\n" + OK_CLASS
OK = "name: t\nload: {concurrency: 2, duration_s: 3}\n" + OK_WORKLOAD


def scen(load: str = "{concurrency: 2, duration_s: 3}", cls: str = OK_CLASS, extra: str = "", name: str = "t") -> str:
    return f"name: {name}\nload: {load}\n{extra}workload:\n  classes:\n{cls}"


def bomb(levels: int = 9, inside: str | None = None) -> str:
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]")
    if inside is None:
        return "\n".join(lines) + "\n" + OK
    body = "\n".join("    " + line for line in lines)
    return OK + f"sampling:\n  extra_body:\n{body}\n"


@dataclass
class Case:
    id: str
    kind: str  # scenario | sweep | cli
    expect: str  # regex one error line must match (the field or flag named)
    text: str | bytes | None = None  # the scenario or sweep file
    args: tuple[str, ...] = ()
    files: dict[str, str | bytes] = field(default_factory=dict)  # beside the file
    duration_flag: bool = True  # scenario rows: pass --duration 3 (some rows test the file's own)
    out_flag: bool = True

    def __str__(self) -> str:
        return self.id


def _trace(lines: str) -> dict[str, str | bytes]:
    return {"trace.jsonl": lines}


TRACE_LOAD = "{rate: 5, duration_s: 3, arrival: trace, trace: {path: trace.jsonl}}"
DATA_CLASS = "    - {name: a, dataset: {path: data.jsonl}, output_tokens: 8}\n"

SCENARIO_CASES = [
    Case("c01", "scenario", r"line 3: not valid YAML", "name: t\nload: {concurrency: 2\nworkload: x\n"),
    Case("c02", "scenario", r"not valid YAML", "name: t\nload:\n\tconcurrency: 2\n"),
    Case("c03", "scenario", r"must be a YAML mapping", ""),
    Case("c04", "scenario", r"must be a YAML mapping", "# only a comment\n"),
    Case("c05", "scenario", r"must be a YAML mapping", "- a\n- b\n"),
    Case("c06", "scenario", r"must be a YAML mapping", "just a string\n"),
    Case("c07", "scenario", r"is a directory", None),
    Case(
        "c08",
        "scenario",
        r"line 2 column \d+: byte 0xe9 is not UTF-8",
        b"name: t\ndescription: caf\xe9\n" + OK.encode()[8:],
    ),
    Case("c09", "scenario", r"(HARNESS_MAX_YAML_NODES|unknown key)", bomb()),
    Case("c09b", "scenario", r"(HARNESS_MAX_YAML_NODES|unknown key)", bomb() + "zz: 1\n"),
    Case(
        "c10",
        "scenario",
        r"line 4: duplicate key 'concurrency' \(first on line 3\)",
        "name: t\nload:\n  concurrency: 2\n  concurrency: 1000\n  duration_s: 3\n" + OK_WORKLOAD,
    ),
    Case("c11", "scenario", r"does_not_exist.yaml: no such file", "MISSING"),
    Case("c13", "scenario", r"not UTF-8", bytes(range(256)) * 4),
    Case("c14", "scenario", r"line 2: a NUL byte", b"name: t\ndesc\x00ription: x\n"),
    Case("c15", "scenario", r"laod: unknown key", OK + "laod: {concurrency: 1}\n"),
    Case(
        "c16",
        "scenario",
        r"workload\.classes\[0\]\.input_tokens\.bogus_dist: unknown key",
        scen(
            cls="    - {name: a, input_tokens: {dist: uniform, min: 1, max: 4, bogus_dist: 1}, output_tokens: 8}\n",
            extra="telemetry: {bogus_tel: 1}\n",
        ),
    ),
    Case("c17", "scenario", r"load\.concurrency: must be a valid integer", scen('{concurrency: "4", duration_s: 3}')),
    Case("c18", "scenario", r"load\.concurrency: must be a valid integer", scen("{concurrency: true, duration_s: 3}")),
    Case(
        "c19",
        "scenario",
        r"load\.duration_s: .*not a duration",
        scen("{concurrency: 2, duration_s: 10 parsecs}"),
        duration_flag=False,
    ),
    Case(
        "c20",
        "scenario",
        r"workload\.classes: must be a valid list",
        "name: t\nload: {concurrency: 2, duration_s: 3}\nworkload:\n  classes: {a: 1}\n",
    ),
    Case(
        "c21",
        "scenario",
        r"input_tokens: must be a token count",
        scen(cls='    - {name: a, input_tokens: "512", output_tokens: 8}\n'),
    ),
    Case(
        "c22",
        "scenario",
        r"weight: must be a valid number",
        scen(cls="    - {name: a, weight: [1], input_tokens: 1, output_tokens: 8}\n"),
    ),
    Case("c23", "scenario", r"name: use only letters", scen(name="../../../tmp/pwn")),
    Case("c24", "scenario", r"load\.concurrency: must be greater than 0", scen("{concurrency: 0, duration_s: 3}")),
    Case("c25", "scenario", r"load\.concurrency: must be greater than 0", scen("{concurrency: -1, duration_s: 3}")),
    Case("c26", "scenario", r"load\.rate: must be greater than 0", scen("{rate: -2, duration_s: 3}")),
    Case(
        "c27",
        "scenario",
        r"load\.duration_s: must be greater than 0",
        scen("{concurrency: 2, duration_s: 0}"),
        duration_flag=False,
    ),
    Case(
        "c28",
        "scenario",
        r"output_tokens\.value: must be greater than 0",
        scen(cls="    - {name: a, input_tokens: 0, output_tokens: -5}\n"),
    ),
    Case(
        "c29",
        "scenario",
        r"input_tokens: max must be >= min",
        scen(cls="    - {name: a, input_tokens: {dist: uniform, min: 100, max: 10}, output_tokens: 8}\n"),
    ),
    Case(
        "c30",
        "scenario",
        r"input_tokens: max must be >= min",
        scen(
            cls="    - {name: a, input_tokens: {dist: normal, mean: 50, std: 5, min: 100, max: 10}, output_tokens: 8}\n"
        ),
    ),
    Case(
        "c31",
        "scenario",
        r"output_tokens: max must be >= min",
        scen(cls="    - {name: a, input_tokens: 8, output_tokens: {dist: lognormal, mean: 50, min: 100, max: 10}}\n"),
    ),
    Case(
        "c32",
        "scenario",
        r"weight: must be greater than 0",
        scen(
            cls="    - {name: a, weight: 0, input_tokens: 1, output_tokens: 8}\n"
            "    - {name: b, weight: 0, input_tokens: 1, output_tokens: 8}\n"
        ),
    ),
    Case(
        "c33",
        "scenario",
        r"classes\[0\]\.weight: must be a finite number",
        scen(
            cls="    - {name: a, weight: .inf, input_tokens: 1, output_tokens: 8}\n"
            "    - {name: b, weight: .inf, input_tokens: 1, output_tokens: 8}\n"
        ),
    ),
    Case(
        "c34",
        "scenario",
        r"weight: must be",
        scen(cls="    - {name: a, weight: .nan, input_tokens: 1, output_tokens: 8}\n"),
    ),
    Case("c35", "scenario", r"load: (required|set exactly one)", "name: t\n" + OK_WORKLOAD),
    Case("c36", "scenario", r"workload: required", "load: {concurrency: 2, duration_s: 3}\n"),
    Case(
        "c37",
        "scenario",
        r"workload\.classes\[0\]: output_tokens required",
        scen(cls="    - {name: a, input_tokens: 8}\n"),
    ),
    Case("c38", "scenario", r"load: set exactly one", scen("{concurrency: 2, rate: 3, duration_s: 3}")),
    Case(
        "c39",
        "scenario",
        r"load\.concurrency: .*HARNESS_MAX_CONCURRENCY",
        scen("{concurrency: 10000000, duration_s: 3}"),
    ),
    Case(
        "c40",
        "scenario",
        r"input_tokens\.value: .*HARNESS_MAX_TOKENS",
        scen(cls="    - {name: a, input_tokens: 1000000000000, output_tokens: 8}\n"),
    ),
    Case(
        "c41",
        "scenario",
        r"shared_prefix\.tokens: .*HARNESS_MAX_TOKENS",
        scen(cls="    - {name: a, input_tokens: 8, output_tokens: 8, shared_prefix: {tokens: 10000000000}}\n"),
    ),
    Case(
        "c42",
        "scenario",
        r"output_tokens\.value: .*HARNESS_MAX_TOKENS",
        scen(cls="    - {name: a, input_tokens: 8, output_tokens: 1000000000000000000000}\n"),
    ),
    Case(
        "c43",
        "scenario",
        r"dataset no/such/file\.jsonl: cannot read",
        scen(cls="    - {name: a, dataset: {path: no/such/file.jsonl}, output_tokens: 8}\n"),
    ),
    Case(
        "c44",
        "scenario",
        r"data\.jsonl:1: ",
        scen(cls=DATA_CLASS),
        files={"data.jsonl": 'nope\n{}\n[1]\n{"prompt": 3}\n'},
    ),
    Case("c45", "scenario", r"holds no records", scen(cls=DATA_CLASS), files={"data.jsonl": ""}),
    Case("c46", "scenario", r"Is a directory", scen(cls=DATA_CLASS), files={"data.jsonl/": ""}),
    Case("c47", "scenario", r"data\.jsonl:\d+: ", scen(cls=DATA_CLASS), files={"data.jsonl": bytes(range(1, 256)) * 8}),
    Case(
        "c48", "scenario", r"trace\.jsonl:1: no number in field 'timestamp'", scen(TRACE_LOAD), files=_trace("x\ny\n")
    ),
    Case("c49", "scenario", r"has 1 timestamp\(s\)", scen(TRACE_LOAD), files=_trace('{"timestamp": 1}\n')),
    Case("c50", "scenario", r"every timestamp .* is the same", scen(TRACE_LOAD), files=_trace("1\n1\n1\n")),
    Case(
        "c51",
        "scenario",
        r"trace\.jsonl:2: nan is not a finite timestamp",
        scen(TRACE_LOAD),
        files=_trace(
            '{"timestamp": 0}\n{"timestamp": NaN}\n{"timestamp": Infinity}\n{"timestamp": -Infinity}\n'
            '{"timestamp": 2}\n'
        ),
    ),
    Case("c52", "scenario", r"load\.trace\.path: cannot read", scen(TRACE_LOAD)),
    Case("c53", "scenario", r"load: arrival trace needs", scen("{concurrency: 2, duration_s: 3, arrival: trace}")),
    Case(
        "c54",
        "scenario",
        r"workload\.tokenizer: ",
        "name: t\nload: {concurrency: 2, duration_s: 3}\nworkload:\n"
        "  tokenizer: /no/such/tokenizer.json\n  classes:\n" + OK_CLASS,
    ),
    Case(
        "c55",
        "scenario",
        r"workload\.tokenizer: cannot load",
        "name: t\nload: {concurrency: 2, duration_s: 3}\nworkload:\n  tokenizer: tok.json\n  classes:\n" + OK_CLASS,
        files={"tok.json": "{garbage: "},
    ),
    Case("c56", "scenario", r"seed: must be greater than or equal to 0", OK + "seed: -1\n"),
    Case("c57", "scenario", r"seed: must be a valid integer", OK + "seed: 1.5\n"),
    Case(
        "c59",
        "scenario",
        r"telemetry\.timeout_s: must be less than or equal to 60",
        OK + "telemetry: {timeout_s: 100, interval_s: 0}\n",
    ),
    Case("c60", "scenario", r"target\.url: 'not-a-url' is not a", OK + "target: {url: not-a-url}\n"),
    Case("c61", "scenario", r"target\.api_key_env: must be the NAME", OK + "target: {api_key_env: sk-live-abc123}\n"),
    Case("c62", "scenario", r"class names must be unique; repeated: a", scen(cls=OK_CLASS * 2)),
    Case("c63", "scenario", r"name: .*at most 120 characters", scen(name="n" * 300), out_flag=False),
    Case("c64", "scenario", r"load: ", "name: t\nload:\n" + OK_WORKLOAD),
    Case(
        "c65",
        "scenario",
        r"sampling\.temperature: must be greater than or equal to 0",
        OK + "sampling: {temperature: -1, top_p: 0, ignore_eos: maybe, extra_body: [1]}\n",
    ),
    Case(
        "c66",
        "scenario",
        r"input_tokens: dist must be one of",
        scen(cls="    - {name: a, input_tokens: {dist: zipf, a: 2}, output_tokens: 8}\n"),
    ),
    Case("c67", "scenario", r"load\.concurrency: must be a valid integer", scen("{concurrency: 4.0, duration_s: 3}")),
    Case("c68", "scenario", r"load\.rate: must be a finite number", scen("{rate: .inf, duration_s: 3}")),
    Case(
        "c69",
        "scenario",
        r"load\.duration_s: must be a finite number",
        scen("{concurrency: 2, duration_s: .inf, requests: 5}"),
        duration_flag=False,
    ),
    Case(
        "c70",
        "scenario",
        r"target\.headers\.X-B: must be a valid string",
        OK + "target: {headers: {X-A: 1, X-B: [x]}}\n",
    ),
    Case(
        "c71", "scenario", r"target\.headers: .*line break", OK + 'target: {headers: {X-A: "v\\r\\nX-Injected: 1"}}\n'
    ),
    Case(
        "c72",
        "scenario",
        r"load\.max_in_flight: .*HARNESS_MAX_IN_FLIGHT",
        scen("{rate: 5, duration_s: 3, max_in_flight: 100000000}"),
    ),
    Case("c74", "scenario", r"warmup\.requests: must be greater than or equal to 0", OK + "warmup: {requests: -3}\n"),
    Case("c76", "scenario", r"HARNESS_MAX_YAML_NODES", bomb(inside="extra_body")),
]

SIM_ENGINE = "engine: {kind: sim}\n"
SWEEP_OK = "name: sw\n" + SIM_ENGINE + "vary: {flags: {max-num-seqs: [4, 8]}}\nscenarios: [ok.yaml]\n"


def sweep(**parts: str) -> str:
    base = {"name": "sw", "engine": "{kind: sim}", "vary": "{flags: {max-num-seqs: [4, 8]}}", "scenarios": "[ok.yaml]"}
    base.update(parts)
    return "".join(f"{k}: {v}\n" for k, v in base.items() if v is not None)


SWEEP_CASES = [
    Case("s01", "sweep", r"must be a YAML mapping", ""),
    Case("s02", "sweep", r"line \d+: not valid YAML", "name: sw\nengine: {kind: sim\nscenarios: x\n"),
    Case("s32", "sweep", r"must be a YAML mapping", "- a\n"),
    Case("s03", "sweep", r"varry: unknown key", SWEEP_OK + "varry: {}\n"),
    Case("s04", "sweep", r"engine\.comand: unknown key", sweep(engine="{kind: sim, comand: [x]}")),
    Case("s05", "sweep", r"engine\.kind: must be", sweep(engine="{kind: vllm2}")),
    Case("s06", "sweep", r"scenarios: required", sweep(scenarios=None)),
    Case("s07", "sweep", r"scenarios\[0\]: nope\.yaml: no such file", sweep(scenarios="[nope.yaml]")),
    Case(
        "s08",
        "sweep",
        r"bad\.yaml \(config .*\): workload\.classes\[0\]\.input_tokens\.value: must be greater than 0",
        sweep(scenarios="[bad.yaml]"),
        files={"bad.yaml": scen(cls="    - {name: a, input_tokens: 0, output_tokens: 8}\n")},
    ),
    Case("s09", "sweep", r"vary\.flags\.(max-num-seqs|b)", sweep(vary="{flags: {max-num-seqs: 4, b: []}}")),
    Case("s10", "sweep", r"base: .*flag name 'max num seqs' is not a flag", SWEEP_OK + "base: {max num seqs: 4}\n"),
    Case("s11", "sweep", r"engine\.port: .*port must be 1-65535", sweep(engine="{kind: sim, port: 70000}")),
    Case("s12", "sweep", r"engine: .*kind custom needs a command", sweep(engine="{kind: custom}")),
    Case(
        "s13", "sweep", r"engine: .*no \{port\} placeholder", sweep(engine="{kind: custom, command: [python3, -m, x]}")
    ),
    Case(
        "s14",
        "sweep",
        r"loads: .*vary one load dimension",
        SWEEP_OK + "loads: {load.concurrency: [1], load.rate: [1]}\n",
    ),
    Case(
        "s15",
        "sweep",
        r"loads\.load\.concurrency\[0\]: must be greater than 0",
        SWEEP_OK + "loads: {load.concurrency: [-1, 2]}\n",
    ),
    Case("s16", "sweep", r"repeats: must be greater than or equal to 1", SWEEP_OK + "repeats: 0\n"),
    Case("s17", "sweep", r"vary: .*mode list needs configs", sweep(vary="{mode: list}")),
    Case(
        "s18",
        "sweep",
        r"vary: .*link key 'concurrency' must be a scenario field path",
        sweep(vary="{flags: {max-num-seqs: [4]}, link: {concurrency: max-num-seqs}}"),
    ),
    Case(
        "s18b",
        "sweep",
        r"vary\.link\.load\.concurrency: no config sets flag",
        sweep(vary="{flags: {max-num-seqs: [4]}, link: {load.concurrency: max-num-batched-tokens}}"),
    ),
    Case(
        "s19",
        "sweep",
        r"vary\.configs\[0\]\.id: use only letters",
        sweep(vary="{mode: list, configs: [{id: ../../etc}]}"),
    ),
    Case(
        "s20",
        "sweep",
        r"ok\.yaml \(config .*\): load\.concurrencyy: unknown key",
        SWEEP_OK + "overrides: {load.concurrencyy: 3}\n",
    ),
    Case(
        "s21",
        "sweep",
        r"ok\.yaml \(config .*\): load\.concurrency: must be a valid integer",
        SWEEP_OK + "overrides: {load.concurrency: abc}\n",
    ),
    Case(
        "s22",
        "sweep",
        r"engine: .*kind external starts nothing",
        sweep(engine="{kind: external, url: 'http://127.0.0.1:1', command: [x]}", vary=None),
    ),
    Case(
        "s23",
        "sweep",
        r"vary: .*include_base applies to mode one-at-a-time only",
        sweep(vary="{mode: grid, include_base: true, flags: {a: [1]}}"),
    ),
    Case(
        "s24",
        "sweep",
        r"vary: 100,000,000 config\(s\) .*HARNESS_MAX_SWEEP_CELLS",
        sweep(vary="{mode: grid, flags: {" + ", ".join(f"f{i}: [0,1,2,3,4,5,6,7,8,9]" for i in range(8)) + "}}"),
    ),
    Case("s25", "sweep", r"(HARNESS_MAX_YAML_NODES|unknown key)", bomb().replace(OK, "") + SWEEP_OK),
    Case(
        "s26",
        "sweep",
        r"line 2 column \d+: byte 0xe9 is not UTF-8",
        b"name: sw\ndescription: caf\xe9\n" + SWEEP_OK.encode()[9:],
    ),
    Case(
        "s27", "sweep", r"engine\.cwd: /no/such/dir: no such directory", sweep(engine="{kind: sim, cwd: /no/such/dir}")
    ),
    Case(
        "s28",
        "sweep",
        r"engine\.command\[5\]: unknown placeholder \{nosuch\}",
        sweep(engine="{kind: custom, command: ['{python}', -m, harness.sim, --port, '{port}', '{nosuch}']}"),
    ),
    Case("s29", "sweep", r"scenarios\[0\]: sub1: is a directory", sweep(scenarios="[sub1]"), files={"sub1/": ""}),
    Case("s31", "sweep", r"name: use only letters", sweep(name="../../x")),
    Case("s33", "sweep", r"slo_attainment: must be less than or equal to 1", SWEEP_OK + "slo_attainment: 1.5\n"),
    Case(
        "s34", "sweep", r"line 6: duplicate key 'repeats' \(first on line 5\)", SWEEP_OK + "repeats: 1\nrepeats: 50\n"
    ),
]

CLI_CASES = [
    Case("a01", "cli", r"load\.concurrency: must be greater than 0", args=("--concurrency", "-1")),
    Case("a02", "cli", r"load\.concurrency: must be greater than 0", args=("--concurrency", "0")),
    Case("a03", "cli", r"argument --rate: invalid float value", args=("--rate", "abc")),
    Case("a04", "cli", r"load\.rate: must be greater than 0", args=("--rate", "0")),
    Case("a05", "cli", r"load\.rate: must be", args=("--rate", "nan")),
    Case("a06", "cli", r"load\.rate: must be a finite number", args=("--rate", "inf")),
    Case("a07", "cli", r"(load\.duration_s: must be greater than 0|--duration.*more than 0)", args=("--duration", "0")),
    Case("a08", "cli", r"(load\.duration_s: must be greater than 0|--duration)", args=("--duration", "-5")),
    Case("a10", "cli", r"(load\.duration_s: must be|--duration)", args=("--duration", "nan")),
    Case("a11", "cli", r"load\.requests: must be greater than 0", args=("--requests", "0")),
    Case("a12", "cli", r"(warmup\.duration_s: must be greater than or equal to 0|--warmup)", args=("--warmup", "-1")),
    Case("a13", "cli", r"seed: must be greater than or equal to 0", args=("--seed", "-1")),
    Case("a14", "cli", r"--processes must be at least 1", args=("--processes", "0")),
    Case("a15", "cli", r"--distributed N", args=("--distributed", "-1")),
    Case("a16", "cli", r"unrecognized arguments: --frobnicate", args=("--frobnicate",)),
    Case("a17", "cli", r"--target: 'not-a-url' is not a base URL", args=("--target", "not-a-url")),
    Case("a18", "cli", r"--target: .*scheme ftp:// is not supported", args=("--target", "ftp://127.0.0.1/")),
    Case("a19", "cli", r"--target: 'http://' names no host", args=("--target", "http://")),
    Case(
        "a20", "cli", r"--target: .*port must be a number from 1 to 65535", args=("--target", "http://127.0.0.1:99999")
    ),
    Case("a21", "cli", r"target http://127\.0\.0\.1:1: cannot connect", args=("--target", "http://127.0.0.1:1")),
    Case("a24", "cli", r"--metrics-port 70000: not a port number", args=("--metrics-port", "70000")),
    Case("a25", "cli", r"--metrics-port -1: not a port number", args=("--metrics-port", "-1")),
    Case("a27", "cli", r"--label 'novalue': expected KEY=VALUE", args=("--label", "novalue")),
    Case("a29", "cli", r"--sim-args .*No closing quotation", args=("--sim-args=--seed 'x",)),
    Case("a30", "cli", r"argument --api: invalid choice", args=("--api", "bogus")),
    Case("a31", "cli", r"/proc/harness-out: cannot create the run directory", args=("--out", "/proc/harness-out")),
    Case("a32", "cli", r"--out /etc/hostname: is a file", args=("--out", "/etc/hostname")),
    Case("a35", "cli", r"--engine-kind 'bogus': not an engine kind", args=("--engine-kind", "bogus")),
    Case("a36", "cli", r"--processes 500: .*HARNESS_MAX_PROCESSES", args=("--processes", "500")),
    Case("a37", "cli", r"argument (-u/)?--concurrency.*invalid int value", args=("--concurrency", "4x")),
    Case("a38", "cli", r"give a scenario file", args=("NO_SCENARIO",)),
    Case(
        "a39",
        "cli",
        r"cannot serve metrics on 256\.1\.1\.1",
        args=("--metrics-port", "1", "--metrics-host", "256.1.1.1"),
    ),
]

CASES = SCENARIO_CASES + SWEEP_CASES + CLI_CASES


def argv_for(case: Case, tmp: Path) -> list[str]:
    """Write the case's files under `tmp`; the harness argv that tries it."""
    for rel, content in case.files.items():
        p = tmp / rel
        if rel.endswith("/"):
            p.mkdir(parents=True, exist_ok=True)
            continue
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = ["--out", str(tmp / "out")] if case.out_flag else []
    if case.kind == "scenario":
        path = tmp / ("does_not_exist.yaml" if case.text == "MISSING" else f"{case.id}.yaml")
        if case.text is None:
            path.mkdir()
        elif case.text != "MISSING":
            path.write_bytes(case.text if isinstance(case.text, bytes) else case.text.encode())
        return [
            "run",
            str(path),
            *(["--duration", "3"] if case.duration_flag else []),
            *out,
            "--quiet",
            "--no-report",
            *case.args,
        ]
    if case.kind == "sweep":
        (tmp / "ok.yaml").write_text(OK)
        path = tmp / f"{case.id}.yaml"
        path.write_bytes(case.text if isinstance(case.text, bytes) else str(case.text).encode())
        return ["sweep", str(path), "--plan", *case.args]
    (tmp / "ok.yaml").write_text(OK)
    if case.args == ("NO_SCENARIO",):
        return ["run", "--duration", "3", *out, "--quiet", "--no-report"]
    args = list(case.args)
    if "--out" in args:
        out = []
    return ["run", str(tmp / "ok.yaml"), "--duration", "3", *out, "--quiet", "--no-report", *args]


def handled_well(rc: int, stderr: str, expect: str) -> str | None:
    """None when the input was refused as the project's rule says; else what was wrong."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if rc != 2:
        return f"exit {rc}"
    if not lines:
        return "no error line"
    if "Traceback" in stderr or "internal error" in stderr or "pydantic" in stderr:
        return "traceback, internal error or pydantic text"
    errors = [line for line in lines if line.startswith("error: ") or ": error: " in line]
    if len(errors) != len(lines) and not any(": error: " in line for line in lines):
        return "lines that are not error: lines: " + json.dumps([x for x in lines if x not in errors][:2])
    if not any(re.search(expect, line) for line in errors):
        return f"no line matches {expect!r}: {errors[:2]}"
    return None


@pytest.mark.parametrize("case", CASES, ids=str)
def test_bad_input_is_one_error_line_naming_the_field(case: Case, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default run directory (results/...) lands here
    argv = argv_for(case, tmp_path)
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse errors
        rc = int(exc.code or 0)
    err = capsys.readouterr().err
    problem = handled_well(rc, err, case.expect)
    assert problem is None, f"{case.id}: {problem}\n{err[-1500:]}"
    assert not (tmp_path / "out" / "requests.jsonl").exists()  # refused before any load


def test_the_table_rebuilds_the_audit_groups() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    # 1a: 76 cases less 3 valid extremes (c58, c73, c75); 1b: 35 less s30 (valid); 1c: 43 less the 11 that need a server,
    # a whole run or are valid now (a09 30s-style durations, a22, a23, a23b, a26, a28, a33, a34, a40, a41, a42)
    assert (len(SCENARIO_CASES), len(SWEEP_CASES), len(CLI_CASES)) == (73, 34, 32)
