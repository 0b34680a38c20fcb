"""Hash-block traces (harness/workload/block_trace.py): parsing, the ideal hit rate from block ids,
prompts that share exactly the blocks the trace says, sessions, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.scenario.models import Scenario
from harness.workload.block_trace import parse
from harness.workload.generator import WorkloadGenerator

ROOT = Path(__file__).resolve().parents[2]
B = 8  # tokens per block in these small traces


def _trace(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


ROWS = [
    {"timestamp": 0, "input_length": 20, "output_length": 4, "hash_ids": [1, 2, 3]},  # 8 + 8 + 4
    {"timestamp": 100, "input_length": 20, "output_length": 4, "hash_ids": [1, 2, 9]},  # shares 16 tokens
    {"timestamp": 200, "input_length": 24, "output_length": 4, "hash_ids": [1, 2, 3]},  # block 3 was sent only 4 long
    {"timestamp": 300, "input_length": 16, "output_length": 4, "hash_ids": [2, 1]},  # same ids, another prefix: none
    {"timestamp": 50, "input_length": 12, "output_length": 4, "hash_ids": [5, 6], "session_id": "s"},
    {"timestamp": 400, "input_length": 20, "output_length": 4, "hash_ids": [5, 6, 7], "session_id": "s"},
]


def test_ideal_prefix_follows_block_chains_and_partial_blocks(tmp_path: Path) -> None:
    t = parse(_trace(ROWS), tmp_path / "t.jsonl", B, "ms")
    assert t.records == 6 and len(t.sessions) == 5  # the two session_id records are one session
    by_line = {r.line: r for s in t.sessions for r in s}
    assert [by_line[n].ideal_prefix for n in range(1, 7)] == [0, 16, 20, 0, 0, 12]
    # cut to whole engine blocks of 4, at most the prompt minus one token
    assert t.ideal_tokens(by_line[3], 4) == 20 and t.ideal_tokens(by_line[3], 16) == 16
    assert t.ideal_hit_rate(4) == pytest.approx((16 + 20 + 12) / (20 + 20 + 24 + 16 + 12 + 20))
    s = next(s for s in t.sessions if len(s) == 2)
    assert [r.at_s for r in s] == [0.05, 0.4]
    assert t.sessions[0][0].line == 1 and t.sessions[1][0].line == 5  # sessions by first timestamp


@pytest.mark.parametrize(
    "row, problem",
    [
        ({"timestamp": 0, "input_length": 0, "output_length": 4, "hash_ids": [1]}, "input_length must be a positive"),
        (
            {"timestamp": 0, "input_length": 8, "output_length": 4, "hash_ids": ["a"]},
            "hash_ids must be a list of integers",
        ),
        ({"timestamp": -1, "input_length": 8, "output_length": 4, "hash_ids": [1]}, "timestamp must be a number >= 0"),
        (
            {"timestamp": 0, "input_length": 8, "output_length": 4, "hash_ids": [1, 2, 3, 4]},
            "more blocks than 8-token blocks",
        ),
        ({"input_length": 8, "output_length": 4, "hash_ids": [1]}, "timestamp required"),
    ],
)
def test_bad_records_name_the_line_and_field(tmp_path: Path, row: dict, problem: str) -> None:
    with pytest.raises(UserError) as e:
        parse(_trace([ROWS[0], row]), tmp_path / "t.jsonl", B, "ms")
    assert f"{tmp_path / 't.jsonl'}:2" in str(e.value) or "timestamp required" in str(e.value)
    assert problem in str(e.value)


def test_a_number_past_pythons_digit_limit_is_not_json(tmp_path: Path) -> None:
    """A ValueError that is no JSONDecodeError: was AttributeError 'msg' (an internal error, exit 70)."""
    line = '{"timestamp": ' + "1" * 5000 + ', "input_length": 8, "output_length": 4, "hash_ids": [1]}\n'
    with pytest.raises(UserError, match=r"t\.jsonl:2: not JSON \(Exceeds the limit \(4300 digits\)"):
        parse(_trace([ROWS[0]]) + line, tmp_path / "t.jsonl", B, "ms")


def _generator(tmp_path: Path, rows: list[dict], **load: object) -> WorkloadGenerator:
    (tmp_path / "t.jsonl").write_text(_trace(rows))
    sc = Scenario.model_validate(
        {
            "name": "t",
            "seed": 5,
            "load": {"concurrency": 1, "requests": 10, **load},
            "workload": {
                "classes": [{"name": "t", "block_trace": {"path": "t.jsonl", "block_tokens": B, "engine_block": 4}}]
            },
        }
    )
    return WorkloadGenerator(sc, base_dir=tmp_path)


def test_prompts_share_exactly_the_blocks_the_trace_says(tmp_path: Path) -> None:
    g = _generator(tmp_path, ROWS)
    a, b, c, d = (g.request(i) for i in range(4))  # sessions in start order: lines 1, 5 (a session), 2, 3
    # blocks 1, 2; then 3 vs 9
    assert a.text.split()[:16] == c.text.split()[:16] and a.text.split()[16] != c.text.split()[16]
    assert len(a.text.split()) == 20 and a.ideal_cached == 0 and c.ideal_cached == 16
    assert d.text.split()[:20] == a.text.split()  # block 3 whole now, its first 4 tokens as line 1 sent them
    assert d.ideal_cached == 20
    sess = b.session
    assert sess is not None and b.turn == 1 and b.input_tokens == 12
    # a second pass over the trace draws fresh words (its cache must not serve the first pass)
    again = g.request(5 + 0)
    assert again.text != a.text and len(again.text.split()) == 20
    # warmup never warms the measured blocks
    assert g.request(0, warmup=True).text.split()[:8] != a.text.split()[:8]


def test_a_session_sends_its_turns_in_order_after_the_previous_ends(tmp_path: Path) -> None:
    g = _generator(
        tmp_path,
        ROWS,
    )
    first = g.request(1)
    conv = first.session
    assert conv is not None
    conv.started_ns, conv.last_end_ns = 1_000_000_000, 1_200_000_000
    conv.complete("reply", 12, 4, len)
    nxt = g.session_turn(conv)
    assert nxt.turn == 2 and nxt.input_tokens == 20 and nxt.text.split()[:8] == first.text.split()[:8]
    # due 350 ms after the session's start (scale 1 in closed loop), or when the previous turn ended if later
    assert conv.next_intended_ns() == 1_350_000_000
    conv.last_end_ns = 1_500_000_000
    assert conv.next_intended_ns() == 1_500_000_000
    assert conv.ideal_cached(20, False) == 12


def test_shipped_trace_is_what_its_script_writes(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "again.jsonl"
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_block_trace.py"), str(out)], check=True, capture_output=True
    )
    assert out.read_bytes() == (ROOT / "scenarios" / "traces" / "mooncake_synthetic.jsonl").read_bytes()


def _span(start_ms: int, n_in: int, n_out: int, conv: str | None = None, cache_read: int | None = None) -> dict:
    attrs = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(n_in)}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": str(n_out)}},
    ]
    if conv is not None:
        attrs.append({"key": "gen_ai.conversation.id", "value": {"stringValue": conv}})
    if cache_read is not None:
        attrs.append({"key": "gen_ai.usage.cache_read.input_tokens", "value": {"intValue": str(cache_read)}})
    return {
        "spanId": f"s{start_ms}",
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + start_ms * 1_000_000),
        "attributes": attrs,
    }


def test_otel_genai_spans_become_a_replayable_trace(tmp_path: Path) -> None:
    """tools/otel_to_block_trace.py: a conversation's requests repeat the previous prompt's whole
    blocks (an agent's growing context), other requests share nothing; the harness reads the result."""
    import subprocess
    import sys

    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            _span(0, 20, 4, "c1"),
                            _span(10, 30, 4),
                            _span(500, 36, 5, "c1"),
                            _span(900, 44, 3, "c1", cache_read=8),
                            {
                                "spanId": "tool",
                                "startTimeUnixNano": "1",
                                "attributes": [{"key": "gen_ai.tool.name", "value": {"stringValue": "x"}}],
                            },
                        ]
                    }
                ]
            }
        ]
    }
    (tmp_path / "export.json").write_text(json.dumps(doc))
    out = tmp_path / "trace.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "otel_to_block_trace.py"),
            str(tmp_path / "export.json"),
            str(out),
            "--block-tokens",
            str(B),
        ],
        check=True,
        capture_output=True,
    )
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["timestamp"] for r in rows] == [0.0, 10.0, 500.0, 900.0]  # the tool span carries no usage: not a request
    c1 = [r for r in rows if r.get("session_id") == "c1"]
    assert [len(r["hash_ids"]) for r in c1] == [3, 5, 6]
    assert c1[1]["hash_ids"][:2] == c1[0]["hash_ids"][:2]  # the previous prompt's 2 whole blocks (20 tokens)
    # cache_read 8
    assert c1[2]["hash_ids"][:1] == c1[1]["hash_ids"][:1] and c1[2]["hash_ids"][1] != c1[1]["hash_ids"][1]
    assert not set(rows[1]["hash_ids"]) & {i for r in c1 for i in r["hash_ids"]}
    t = parse(out.read_text(), out, B, "ms")
    assert (
        t.records == 4 and len(t.sessions) == 2 and t.ideal_hit_rate(B) == pytest.approx((16 + 8) / (20 + 30 + 36 + 44))
    )
