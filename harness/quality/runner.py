"""Send the quality prompts to one server, greedily, in file order, and keep every output.

One request at a time (no batching effects between prompts, the same order on every config),
non-streaming, `temperature: 0` and a fixed `seed`, with per-token log-probs when the server
gives them (asked once; a server that refuses them is asked again without, for the whole set).
Outputs are appended to `quality.jsonl` as they arrive, so a run cut short keeps what it got.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import requests

from harness.errors import TargetError
from harness.quality.dataset import QualityPrompt, QualitySet
from harness.scenario.quality import QualitySpec

OUTPUTS_FILE = "quality.jsonl"
SUMMARY_FILE = "quality.json"


@dataclass
class QualityOutput:
    """One prompt's answer from one server."""

    id: str
    text: str = ""
    tokens: list[str] | None = None  # the server's tokens (from logprobs); None when it gave none
    logprobs: list[float] | None = None  # the chosen tokens' log-probs
    top_logprobs: list[dict[str, float]] | None = None  # per position: token -> log-prob
    finish_reason: str | None = None
    completion_tokens: int | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> QualityOutput:
        return cls(**{k: obj[k] for k in cls.__dataclass_fields__ if k in obj})  # a missing key: its default


@dataclass
class QualityRun:
    """All outputs of one server for one prompt set, plus how they were obtained."""

    outputs: list[QualityOutput]
    prompts_sha256: str
    model: str | None
    target: str
    max_tokens: int
    logprobs: bool  # the server returned log-probs
    seconds: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        return sum(1 for o in self.outputs if o.error)

    def by_id(self) -> dict[str, QualityOutput]:
        return {o.id: o for o in self.outputs}

    def summary(self) -> dict[str, Any]:
        return {
            "prompts_sha256": self.prompts_sha256,
            "model": self.model,
            "target": self.target,
            "max_tokens": self.max_tokens,
            "logprobs": self.logprobs,
            "prompts": len(self.outputs),
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            **self.meta,
        }


def _first_model(base: str, session: requests.Session, timeout: float) -> str:
    try:
        r = session.get(base + "/v1/models", timeout=timeout)
        r.raise_for_status()
        return str(r.json()["data"][0]["id"])
    except (requests.RequestException, ValueError, KeyError, IndexError) as exc:
        raise TargetError(
            f"quality: cannot list models at {base}/v1/models ({type(exc).__name__}: {exc}); "
            "is the server up? pass --model to skip the lookup"
        ) from None


def request_body(p: QualityPrompt, spec: QualitySpec, model: str, logprobs: bool) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of one greedy request."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": p.max_tokens or spec.max_tokens,
        "temperature": 0,
        "seed": spec.seed,
        "stream": False,
    }
    if p.chat:
        body["messages"] = list(p.messages or ())
        if logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = spec.top_logprobs
        return "/v1/chat/completions", body
    body["prompt"] = p.prompt
    if logprobs:
        body["logprobs"] = spec.top_logprobs
    return "/v1/completions", body


def parse_choice(p: QualityPrompt, data: dict[str, Any]) -> QualityOutput:
    """A non-streaming response -> text, tokens and log-probs (chat or completions shape)."""
    choice = data["choices"][0]
    out = QualityOutput(
        id=p.id,
        finish_reason=choice.get("finish_reason"),
        completion_tokens=(data.get("usage") or {}).get("completion_tokens"),
    )
    lp = choice.get("logprobs")
    if p.chat:
        out.text = (choice.get("message") or {}).get("content") or ""
        content = lp.get("content") if isinstance(lp, dict) else None
        if isinstance(content, list) and content:
            out.tokens = [str(c.get("token")) for c in content]
            out.logprobs = [float(c.get("logprob") or 0.0) for c in content]
            tops = [{str(t["token"]): float(t["logprob"]) for t in (c.get("top_logprobs") or [])} for c in content]
            out.top_logprobs = tops if any(tops) else None
    else:
        out.text = choice.get("text") or ""
        if isinstance(lp, dict) and isinstance(lp.get("tokens"), list) and lp["tokens"]:
            out.tokens = [str(t) for t in lp["tokens"]]
            out.logprobs = [float(v) if v is not None else 0.0 for v in lp.get("token_logprobs") or []]
            given = lp.get("top_logprobs")
            if isinstance(given, list) and any(given):
                out.top_logprobs = [{str(k): float(v) for k, v in (t or {}).items()} for t in given]
    return out


def run_quality(
    qset: QualitySet,
    spec: QualitySpec,
    target_url: str,
    *,
    model: str | None = None,
    headers: dict[str, str] | None = None,
    out_dir: Path | None = None,
    on_output: Callable[[int, QualityOutput], None] | None = None,
) -> QualityRun:
    """Send every prompt of `qset` to `target_url` (greedy, in order); return the outputs.

    With `out_dir`, outputs are appended to `out_dir/quality.jsonl` one line per prompt as they
    arrive and `out_dir/quality.json` holds the run's facts at the end. A prompt that fails
    (HTTP error, timeout) is kept with its `error`; an unreachable server for the model lookup
    raises `TargetError`."""
    base = target_url.rstrip("/")
    session = requests.Session()
    session.headers.update(headers or {})
    model = model or _first_model(base, session, min(spec.timeout_s, 30.0))
    want_logprobs = spec.logprobs
    got_logprobs = False
    with contextlib.ExitStack() as files:
        sink = None
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            sink = files.enter_context(open(out_dir / OUTPUTS_FILE, "w"))
        t0 = time.monotonic()
        outputs: list[QualityOutput] = []
        for i, p in enumerate(qset.prompts):
            out = _one(session, base, p, spec, model, want_logprobs)
            if out.error and want_logprobs and "logprob" in out.error.lower():
                want_logprobs = False  # the server refuses log-probs: ask without, for every prompt
                out = _one(session, base, p, spec, model, False)
            got_logprobs = got_logprobs or out.logprobs is not None
            outputs.append(out)
            if sink is not None:
                sink.write(json.dumps(asdict(out)) + "\n")
                sink.flush()
            if on_output is not None:
                on_output(i, out)
    run = QualityRun(
        outputs=outputs,
        prompts_sha256=qset.sha256,
        model=model,
        target=base,
        max_tokens=spec.max_tokens,
        logprobs=got_logprobs,
        seconds=time.monotonic() - t0,
    )
    if out_dir is not None:
        write_summary(out_dir, run.summary())
    return run


def _one(
    session: requests.Session, base: str, p: QualityPrompt, spec: QualitySpec, model: str, logprobs: bool
) -> QualityOutput:
    path, body = request_body(p, spec, model, logprobs)
    try:
        r = session.post(base + path, json=body, timeout=spec.timeout_s)
    except requests.RequestException as exc:
        return QualityOutput(id=p.id, error=f"{type(exc).__name__}: {exc}")
    if r.status_code != 200:
        return QualityOutput(id=p.id, error=f"HTTP {r.status_code}: {r.text[:300]}")
    try:
        return parse_choice(p, r.json())
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return QualityOutput(id=p.id, error=f"unreadable response ({type(exc).__name__}: {exc})")


def write_summary(out_dir: Path, data: dict[str, Any]) -> None:
    tmp = out_dir / (SUMMARY_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(out_dir / SUMMARY_FILE)


def read_quality_run(run_dir: Path) -> QualityRun | None:
    """The outputs a run stored (`quality.jsonl` + `quality.json`), or None when it has none."""
    path = run_dir / OUTPUTS_FILE
    if not path.is_file():
        return None
    outputs = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                outputs.append(QualityOutput.from_json(json.loads(line)))
            except (ValueError, TypeError):
                continue  # a line cut by a crash
    try:
        meta = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        meta = {}
    return QualityRun(
        outputs=outputs,
        prompts_sha256=str(meta.get("prompts_sha256") or ""),
        model=meta.get("model"),
        target=str(meta.get("target") or ""),
        max_tokens=int(meta.get("max_tokens") or 0),
        logprobs=bool(meta.get("logprobs")),
        seconds=float(meta.get("seconds") or 0.0),
        meta={k: v for k, v in meta.items() if k in ("verdict", "config", "spec", "prompts_file")},
    )
