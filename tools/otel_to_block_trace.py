"""Convert OpenTelemetry GenAI spans (an OTLP/JSON trace export) into a hash-block trace the
harness replays (`workload.classes[].block_trace`, docs/traffic.md).

    python tools/otel_to_block_trace.py EXPORT.json [OUT.jsonl] [--block-tokens 512]

Input: OTLP/JSON (`{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}`), one document or one
per line, as the OpenTelemetry Collector's file exporter writes it. Every span with
`gen_ai.usage.input_tokens` is one request (the semantic conventions' inference spans: `chat`,
`text_completion`, `generate_content`); `gen_ai.usage.output_tokens` is its output length and its
start time its timestamp. Spans sharing `gen_ai.conversation.id` are one session, in start order.

The spans say nothing about what the prompts share, so the hash ids are built the way an agent's
context grows: a session's request repeats the whole blocks of the previous request's prompt and
adds new blocks for the rest (`gen_ai.usage.cache_read.input_tokens`, where the span has it,
bounds the repeated part instead: what the provider did serve from its cache). Requests of
different sessions share nothing. The replay then has an agent's reuse, and no more.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INPUT, OUTPUT = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
CACHE_READ, CONVERSATION = "gen_ai.usage.cache_read.input_tokens", "gen_ai.conversation.id"


def _value(v: dict[str, Any]) -> Any:
    for key in ("intValue", "doubleValue", "stringValue", "boolValue"):
        if key in v:
            return int(v[key]) if key == "intValue" else v[key]
    return None


def spans(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every span of one OTLP/JSON document, its attributes flattened to {key: value}."""
    for rs in doc.get("resourceSpans") or []:
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            for span in ss.get("spans") or []:
                attrs = {a["key"]: _value(a.get("value") or {}) for a in span.get("attributes") or [] if "key" in a}
                yield {
                    "start_ns": int(span.get("startTimeUnixNano") or 0),
                    "attrs": attrs,
                    "id": span.get("spanId") or "",
                }


def read(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [s for d in docs for s in spans(d) if isinstance(s["attrs"].get(INPUT), int) and s["attrs"][INPUT] > 0]


def convert(requests: list[dict[str, Any]], block_tokens: int) -> list[dict[str, Any]]:
    requests = sorted(requests, key=lambda s: s["start_ns"])
    if not requests:
        return []
    t0 = requests[0]["start_ns"]
    next_id = 0
    last: dict[Any, tuple[list[int], int]] = {}  # conversation -> (its previous request's ids, input tokens)
    out = []
    for s in requests:
        a = s["attrs"]
        n_in, n_out = a[INPUT], max(1, int(a.get(OUTPUT) or 1))
        conv = a.get(CONVERSATION)
        prev_ids, prev_in = last.get(conv, ([], 0)) if conv is not None else ([], 0)
        keep = min(prev_in, n_in)
        if isinstance(a.get(CACHE_READ), int):
            keep = min(keep, a[CACHE_READ])
        ids = prev_ids[: keep // block_tokens]
        need = -(-n_in // block_tokens) - len(ids)
        ids = ids + list(range(next_id, next_id + need))
        next_id += need
        row: dict[str, Any] = {
            "timestamp": round((s["start_ns"] - t0) / 1e6, 3),
            "input_length": n_in,
            "output_length": n_out,
            "hash_ids": ids,
        }
        if conv is not None:
            row["session_id"] = str(conv)
            last[conv] = (ids, n_in)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--block-tokens", type=int, default=512)
    a = ap.parse_args(argv)
    rows = convert(read(Path(a.export)), a.block_tokens)
    if not rows:
        print(f"{a.export}: no span with {INPUT} (GenAI inference spans)", file=sys.stderr)
        return 2
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if a.out:
        Path(a.out).write_text(text)
        print(
            f"wrote {len(rows)} requests ({len({r.get('session_id') for r in rows if 'session_id' in r})} sessions) to {a.out}"
        )
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
