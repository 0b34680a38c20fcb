"""Deterministic request generation: request i is a pure function of (seed, i).

Measured requests use index domain 2, warmup requests domain 3, so the measured work is the same
whatever the warmup did, and any worker can build any request without talking to the others.
Prompts are pseudo-words (the built-in tokenizer's vocabulary): with the built-in tokenizer a
prompt of N words is exactly N tokens; with a model tokenizer the text is cut to N tokens.
Each request's own text starts with words drawn for that request, so two requests share KV
blocks only through a declared shared prefix. A class with a `dataset` replays the file's prompts
instead (harness.workload.dataset): record k of request i is drawn from (seed, i) too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from harness.errors import UserError
from harness.scenario.models import RequestClass, Scenario, adapter_weights
from harness.workload import block_trace
from harness.workload.agent import AGENT_DOMAIN, AgentConversation, agent_plan, plan_agent
from harness.workload.block_trace import BlockTraceFile, TraceRecord, TraceSession
from harness.workload.builtin_tokenizer import VOCAB, BuiltinTokenizer
from harness.workload.dataset import LoadedDataset, load_dataset
from harness.workload.files import resolve
from harness.workload.lengths import mean_length, sample_length
from harness.workload.sessions import (
    SYSTEM_DOMAIN,
    Conversation,
    RecordedConversation,
    SessionPlan,
    TurnPlan,
    load_conversations,
    plan_session,
)
from harness.workload.tokenizers import HFTokenizer

MEASURED, WARMUP = 2, 3
ADAPTER_DOMAIN = 9
BLOCK_DOMAIN = 12  # the words of a block trace's blocks
#: block texts kept per load process (a long trace reuses its blocks: drawn once, not per request)
BLOCK_CACHE = 8192
_VOCAB_ARRAY = np.array(VOCAB)


def cumulative(weights: list[float]) -> np.ndarray:
    """The cumulative shares of `weights`, divided by the largest first: two weights of 1e308 sum
    to inf, every share was NaN and every request went to the last class (audit R19)."""
    w = np.asarray(weights, dtype=float)
    w = w / w.max()
    return np.cumsum(w / w.sum())


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    index: int
    class_name: str
    prefix: str
    text: str
    input_tokens: int  # intended prompt length, prefix included
    output_tokens: int  # max_tokens
    prefix_id: int | None
    warmup: bool = False
    messages: tuple[dict[str, str], ...] | None = None  # a dataset's chat messages, sent as they are
    session: Conversation | None = None  # a multi-turn session's history (harness.workload.sessions)
    turn: int = 0  # 1-based turn number within the session (0: not a session)
    adapter: str | None = None  # the LoRA adapter asked for as `model` (workload.adapters)
    ideal_cached: int | None = None  # what an unbounded prefix cache could serve (a block trace's record)


def calibration_text(n: int = 512) -> str:
    """A fixed sample of `n` built-in words, for measuring the target's tokens per word."""
    return _words(np.random.default_rng([0x70C, n]), n)


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(_VOCAB_ARRAY[rng.integers(0, len(VOCAB), n)])


class WorkloadGenerator:
    def __init__(
        self, scenario: Scenario, tokenizer: BuiltinTokenizer | HFTokenizer | None = None, base_dir: Path | None = None
    ) -> None:
        self.scenario = scenario
        self.seed = scenario.seed
        #: workload.prompt_salt: other words, same lengths (None: the seed's words, as always)
        self.salt = scenario.workload.prompt_salt
        self.tokenizer = tokenizer or BuiltinTokenizer()
        self.classes = scenario.workload.classes
        self._cum = cumulative([c.weight for c in self.classes])
        self._prefixes: dict[str, list[str]] = {}
        for ci, cls in enumerate(self.classes):
            sp = cls.shared_prefix
            if sp is not None:
                self._prefixes[cls.name] = [
                    self._fit(
                        _words(np.random.default_rng([self.seed, 4, ci, j, *self._salt()]), self._n_words(sp.tokens)),
                        sp.tokens,
                    )
                    for j in range(sp.count)
                ]
        #: session classes: their system prompts and recorded conversations
        self._systems: dict[str, list[str]] = {}
        self._recorded: dict[str, list[RecordedConversation]] = {}
        for ci, cls in enumerate(self.classes):
            ss = cls.session
            if ss is None:
                continue
            if ss.system_prompt is not None:
                sp = ss.system_prompt
                self._systems[cls.name] = [
                    self._fit(
                        _words(np.random.default_rng([self.seed, SYSTEM_DOMAIN, ci, j, *self._salt()]), sp.tokens),
                        sp.tokens,
                    )
                    for j in range(sp.count)
                ]
            if ss.dataset is not None:
                _sha, self._recorded[cls.name] = load_conversations(ss.dataset.path, base_dir, self.tokenizer.count)
        #: class name -> (adapter names, cumulative weights): the class's own mix or the workload's
        self._adapters: dict[str, tuple[list[str], np.ndarray]] = {}
        for cls in self.classes:
            mix = cls.adapters or scenario.workload.adapters
            if mix is not None:
                pairs = adapter_weights(mix)
                self._adapters[cls.name] = ([p[0] for p in pairs], cumulative([p[1] for p in pairs]))
        #: a block_trace class (the only class when there is one): its file and the block texts drawn so far
        self.block_trace: BlockTraceFile | None = None
        self._blocks: dict[tuple[int, int, int], str] = {}
        bt_cls = next((c for c in self.classes if c.block_trace is not None), None)
        if bt_cls is not None:
            assert bt_cls.block_trace is not None
            self.block_trace = block_trace.load(bt_cls.block_trace, base_dir)
            self._bt_spec = bt_cls.block_trace
            load = scenario.load
            # open loop: the arrival pattern scales the trace's gaps to load.rate; later turns the same way
            tr = self.block_trace.rate
            self._bt_scale = tr / load.rate if (load.rate is not None and tr) else 1.0
        #: class name -> its dataset (files read once, shared between classes naming the same one)
        self.datasets: dict[str, LoadedDataset] = {}
        loaded: dict[Path, LoadedDataset] = {}
        for cls in self.classes:
            if cls.dataset is None:
                continue
            key = resolve(cls.dataset.path, base_dir)
            if key not in loaded:
                loaded[key] = load_dataset(cls.dataset.path, base_dir, self.tokenizer)
            ds = self.datasets[cls.name] = loaded[key]
            if cls.output_tokens is None and any(r.output_tokens is None for r in ds.records):
                raise UserError(
                    f"workload.classes[{cls.name}].output_tokens: {ds.path} has records without output_tokens "
                    "(or a ShareGPT reply); give the class an output_tokens length or distribution"
                )

    def _salt(self) -> tuple[int, ...]:
        return () if self.salt is None else (self.salt,)

    def _fit(self, text: str, tokens: int) -> str:
        if isinstance(self.tokenizer, HFTokenizer):
            return self.tokenizer.fit(text, tokens)
        return text

    def _n_words(self, tokens: int) -> int:
        """Built-in words for `tokens` of the target's tokens: one each, or fewer when the target's
        tokenizer splits a word into several (workload.token_scale, measured with its /tokenize)."""
        scale = self.scenario.workload.token_scale
        if scale is None or isinstance(self.tokenizer, HFTokenizer):
            return tokens
        return max(1, round(tokens / scale))

    def request(self, index: int, warmup: bool = False) -> PlannedRequest:
        planned = self._request(index, warmup)
        mix = self._adapters.get(planned.class_name)
        if mix is None:
            return planned
        # its own rng: adding adapters to a scenario changes no prompt, length or class
        u = np.random.default_rng([self.seed, ADAPTER_DOMAIN, WARMUP if warmup else MEASURED, index]).random()
        names, cum = mix
        adapter = names[min(int(np.searchsorted(cum, u, side="right")), len(names) - 1)]
        if planned.session is not None:
            planned.session.adapter = adapter  # every turn of a session asks for the same adapter
        return replace(planned, adapter=adapter)

    def _request(self, index: int, warmup: bool = False) -> PlannedRequest:
        rng = np.random.default_rng([self.seed, WARMUP if warmup else MEASURED, index])
        ci = int(np.searchsorted(self._cum, rng.random(), side="right"))
        cls: RequestClass = self.classes[min(ci, len(self.classes) - 1)]
        if cls.block_trace is not None:
            return self._traced(cls, index, warmup)
        if cls.session is not None:
            plan = plan_session(
                cls.session,
                cls.name,
                self.seed,
                index,
                warmup,
                self._session_words,
                self._systems.get(cls.name, []),
                self._recorded.get(cls.name),
                self.tokenizer.count,
                self._salt(),
            )
            if cls.session.agent is not None:
                return self.session_turn(self._agent(cls, plan, index, warmup))
            return self.session_turn(Conversation(plan))
        if cls.dataset is not None:
            return self._replayed(cls, index, warmup, rng)
        assert cls.input_tokens is not None and cls.output_tokens is not None  # validated
        n_in = sample_length(cls.input_tokens, rng)
        n_out = sample_length(cls.output_tokens, rng)
        prefix, prefix_id = "", None
        sp = cls.shared_prefix
        if sp is not None and rng.random() < sp.fraction:
            prefix_id = int(rng.integers(0, sp.count))
            prefix = self._prefixes[cls.name][prefix_id]
            own = max(n_in - sp.tokens, 1)
            n_in = sp.tokens + own
        else:
            own = n_in
        if self.salt is not None:  # lengths and prefix choice above came from rng: only the words change
            rng = np.random.default_rng([self.seed, WARMUP if warmup else MEASURED, index, 6, self.salt])
        text = self._fit(_words(rng, self._n_words(own)), own)
        return PlannedRequest(index, cls.name, prefix, text, n_in, n_out, prefix_id, warmup)

    def _agent(self, cls: RequestClass, plan: SessionPlan, index: int, warmup: bool) -> AgentConversation:
        """An agentic session: the system prompt of the session plan, steps of its own (workload.agent)."""
        assert cls.session is not None and cls.session.agent is not None
        rng = np.random.default_rng([self.seed, AGENT_DOMAIN, WARMUP if warmup else MEASURED, index, *self._salt()])
        steps = plan_agent(cls.session, rng, self._session_words)
        return AgentConversation(
            agent_plan(plan, steps), steps=steps, tool_format=cls.session.agent.tool_format, count=self.tokenizer.count
        )

    # ---------------------------------------------------------------- block traces
    def _block_text(self, warm: int, p: int, hid: int, tokens: int) -> str:
        """Block `hid` of pass `p`: the same words wherever it appears; `tokens` < a block: its start."""
        spec = self._bt_spec
        key = (warm, p, hid)
        full = self._blocks.get(key)
        if full is None:
            if len(self._blocks) >= BLOCK_CACHE:
                self._blocks.pop(next(iter(self._blocks)))
            rng = np.random.default_rng([self.seed, BLOCK_DOMAIN, warm, p, hid & 0xFFFFFFFFFFFF, *self._salt()])
            full = self._blocks[key] = self._fit(_words(rng, self._n_words(spec.block_tokens)), spec.block_tokens)
        if tokens >= spec.block_tokens:
            return full
        if isinstance(self.tokenizer, HFTokenizer):
            return self.tokenizer.fit(full, tokens)
        return " ".join(full.split(" ")[: self._n_words(tokens)])

    def _trace_text(self, rec: TraceRecord, warm: int, p: int, index: int) -> str:
        """The record's prompt: its blocks in order, then words of its own if input_length runs past them."""
        spec = self._bt_spec
        left, parts = rec.input_tokens, []
        for hid in rec.hash_ids:
            if left <= 0:
                break
            n = min(left, spec.block_tokens)
            parts.append(self._block_text(warm, p, hid, n))
            left -= n
        if left > 0:
            rng = np.random.default_rng([self.seed, BLOCK_DOMAIN, warm, p, -1 - index, rec.line, *self._salt()])
            parts.append(self._fit(_words(rng, self._n_words(left)), left))
        return " ".join(parts)

    def _traced(self, cls: RequestClass, index: int, warmup: bool) -> PlannedRequest:
        """Request `index` replays session index % n of the trace (pass index // n: fresh words)."""
        bt = self.block_trace
        assert bt is not None and cls.block_trace is not None
        n = len(bt.sessions)
        session, p, warm = bt.sessions[index % n], index // n, 1 if warmup else 0
        engine_block = cls.block_trace.engine_block
        if len(session) == 1:
            rec = session[0]
            return PlannedRequest(
                index,
                cls.name,
                "",
                self._trace_text(rec, warm, p, index),
                rec.input_tokens,
                rec.output_tokens,
                None,
                warmup,
                ideal_cached=bt.ideal_tokens(rec, engine_block),
            )
        plan = SessionPlan(
            index,
            cls.name,
            warmup,
            "",
            0,
            None,
            tuple(TurnPlan("", r.input_tokens, r.output_tokens, 0.0) for r in session),
        )
        conv = TraceSession(
            plan,
            records=session,
            build=lambda r: self._trace_text(r, warm, p, index),
            ideal=lambda r: bt.ideal_tokens(r, engine_block),
            scale=self._bt_scale,
        )
        return self.session_turn(conv)

    def _session_words(self, rng: np.random.Generator, n: int) -> str:
        return self._fit(_words(rng, n), n)

    def session_turn(self, conv: Conversation) -> PlannedRequest:
        """The request of the conversation's next turn: its whole history plus the new user message."""
        messages, text, n_in, n_out = conv.next_messages()
        p = conv.plan
        return PlannedRequest(
            p.index,
            p.class_name,
            "",
            text,
            n_in,
            n_out,
            p.system_id,
            p.warmup,
            messages,
            conv,
            conv.turn_number(),
            conv.adapter,
        )

    def _replayed(self, cls: RequestClass, index: int, warmup: bool, rng: np.random.Generator) -> PlannedRequest:
        records = self.datasets[cls.name].records
        assert cls.dataset is not None
        if cls.dataset.order == "sequential":
            # warmup walks the file from its end, so it warms the engine, not the measured prompts
            k = (len(records) - 1 - index % len(records)) if warmup else index % len(records)
        else:
            k = int(rng.integers(0, len(records)))
        rec = records[k]
        n_out = rec.output_tokens
        if n_out is None:
            assert cls.output_tokens is not None  # checked when the dataset was read
            n_out = sample_length(cls.output_tokens, rng)
        return PlannedRequest(index, cls.name, "", rec.text, rec.input_tokens, n_out, None, warmup, rec.messages)

    def mean_input_tokens(self, cls: RequestClass) -> float:
        if cls.dataset is not None:
            records = self.datasets[cls.name].records
            return sum(r.input_tokens for r in records) / len(records)
        assert cls.input_tokens is not None
        return mean_length(cls.input_tokens)


def expected_prefix_hit_rate(scenario: Scenario, block_size: int = 16) -> float | None:
    """Expected fraction of prompt tokens served from the prefix cache in steady state.

    Counts only full blocks of the shared prefix (engines cache whole blocks) and ignores the
    first occurrence of each prefix. None when the scenario declares no shared prefix, or when a
    dataset class's prompts (whose sharing is unknown) are part of the mix.
    """
    classes = scenario.workload.classes
    if not any(c.shared_prefix for c in classes) or any(
        c.dataset is not None or c.session is not None for c in classes
    ):
        return None  # sessions: the ideal follows from the replies, computed during the run (summary.sessions)
    top = max(c.weight for c in classes)
    total_w = sum(c.weight / top for c in classes)  # over the largest first: 1e308 + 1e308 is inf
    cached = prompt = 0.0
    for cls in classes:
        w = cls.weight / top / total_w
        assert cls.input_tokens is not None
        mean_in = mean_length(cls.input_tokens)
        sp = cls.shared_prefix
        if sp is None:
            prompt += w * mean_in
            continue
        with_prefix = sp.tokens + max(mean_in - sp.tokens, 1)
        prompt += w * (sp.fraction * with_prefix + (1 - sp.fraction) * mean_in)
        cached += w * sp.fraction * (sp.tokens // block_size) * block_size
    return cached / prompt if prompt else None
