"""Pydantic models of the scenario file: what to send, how fast, and what counts as good.

Every model forbids unknown keys so a typo is an error, not a silently ignored setting.
Durations are seconds (`*_s`; `30s`, `5m`, `1h30m` are read too), latencies milliseconds (`*_ms`), lengths tokens.
The building blocks (strict base, bounds, length distributions, shared prefix, dataset) live in
harness.scenario.parts and are re-exported here (`X as X`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from harness import limits
from harness.scenario.block_trace import BlockTrace
from harness.scenario.checks import check_header, check_url
from harness.scenario.choices import ApiName, ArrivalName
from harness.scenario.durations import Seconds, rename_duration_key
from harness.scenario.parts import Dataset as Dataset
from harness.scenario.parts import Fixed as Fixed
from harness.scenario.parts import LengthDist as LengthDist
from harness.scenario.parts import LogNormal as LogNormal
from harness.scenario.parts import Normal as Normal
from harness.scenario.parts import SharedPrefix as SharedPrefix
from harness.scenario.parts import Strict as Strict
from harness.scenario.parts import Tokens as Tokens
from harness.scenario.parts import Uniform as Uniform
from harness.scenario.parts import length_shorthand
from harness.scenario.parts import within as within
from harness.scenario.quality import QualitySpec
from harness.scenario.session import SessionSpec

_within = within


# ---------------------------------------------------------------- SLOs and classes
class SLO(Strict):
    """A request is 'good' when every limit that is set holds."""

    ttft_ms: Annotated[float, Field(gt=0)] | None = None
    tpot_ms: Annotated[float, Field(gt=0)] | None = None
    e2e_ms: Annotated[float, Field(gt=0)] | None = None

    def merged(self, override: SLO | None) -> SLO:
        if override is None:
            return self
        return SLO(**{**self.model_dump(), **override.model_dump(exclude_none=True)})


AdapterName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:/@+-]+$")]


class AdapterWeight(Strict):
    """One LoRA adapter of a mix, asked for by name as the request's `model`."""

    name: AdapterName
    weight: Annotated[float, Field(gt=0)] = 1.0


class ZipfAdapters(Strict):
    """Adapters whose popularity falls with rank: the k-th name has weight 1 / k**zipf."""

    names: Annotated[list[AdapterName], Field(min_length=1)]
    zipf: Annotated[float, Field(ge=0, le=10)] = 1.0


Adapters = Annotated[list[AdapterWeight], Field(min_length=1)] | ZipfAdapters


def adapter_weights(mix: list[AdapterWeight] | ZipfAdapters) -> list[tuple[str, float]]:
    """(name, weight) pairs of an adapter mix, in its order."""
    if isinstance(mix, ZipfAdapters):
        return [(n, 1.0 / (k + 1) ** mix.zipf) for k, n in enumerate(mix.names)]
    return [(a.name, a.weight) for a in mix]


def _unique_adapters(mix: Any) -> Any:
    names = [n for n, _w in adapter_weights(mix)] if mix is not None else []
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"adapter names must be unique; repeated: {', '.join(dupes)}")
    return mix


class RequestClass(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    weight: Annotated[float, Field(gt=0)] = 1.0
    input_tokens: LengthDist | None = None
    output_tokens: LengthDist | None = None
    dataset: Dataset | None = None
    shared_prefix: SharedPrefix | None = None
    session: SessionSpec | None = Field(default=None, description="multi-turn conversations (harness.scenario.session)")
    block_trace: BlockTrace | None = Field(
        default=None,
        description="prompts, lengths and sessions from a trace of "
        "hashed prefix blocks (Mooncake format; harness.scenario.block_trace)",
    )
    adapters: Annotated[Adapters | None, AfterValidator(_unique_adapters)] = Field(
        default=None, description="LoRA adapters this class asks for (overrides workload.adapters)"
    )
    slo: SLO | None = None

    @model_validator(mode="after")
    def _lengths(self) -> RequestClass:
        if self.block_trace is not None:
            extra = [
                k
                for k in ("input_tokens", "output_tokens", "dataset", "shared_prefix", "session")
                if getattr(self, k) is not None
            ]
            if extra:
                raise ValueError(
                    f"{', '.join(extra)}: a block_trace class takes its prompts, lengths and sessions "
                    "from the trace; remove them"
                )
            return self
        if self.session is not None:
            extra = [
                k for k in ("input_tokens", "output_tokens", "dataset", "shared_prefix") if getattr(self, k) is not None
            ]
            if extra:
                raise ValueError(
                    f"{', '.join(extra)}: a session class takes its lengths from session "
                    "(user_tokens, output_tokens, system_prompt, dataset); remove them"
                )
            return self
        if self.dataset is None:
            missing = [k for k in ("input_tokens", "output_tokens") if getattr(self, k) is None]
            if missing:
                raise ValueError(
                    f"{' and '.join(missing)} required (a length or a distribution), or a dataset of prompts"
                )
            self._prefix_fits()
            return self
        if self.input_tokens is not None:
            raise ValueError("input_tokens: a dataset's prompts have their own lengths; remove input_tokens")
        if self.shared_prefix is not None:
            raise ValueError("shared_prefix: a dataset's prompts are sent as they are; remove shared_prefix")
        return self

    def _prefix_fits(self) -> None:
        """input_tokens is the whole prompt, the shared prefix included (vllm bench adds its prefix
        length to the input length; here the prefix is part of it). A prefix as long as most
        prompts (the distribution's middle) would make them `prefix + 1` tokens, not the lengths
        asked for: refused. A rare short draw below the prefix gets the prefix + 1 token."""
        sp, dist = self.shared_prefix, self.input_tokens
        if sp is None or dist is None:
            return
        middle = (
            dist.value if dist.dist == "fixed" else (dist.min + dist.max) / 2 if dist.dist == "uniform" else dist.mean
        )
        if sp.tokens >= middle:
            shown = (
                f"{dist.value}"
                if dist.dist == "fixed"
                else f"{dist.min}..{dist.max}"
                if dist.dist == "uniform"
                else f"mean {dist.mean:g}"
            )
            raise ValueError(
                f"shared_prefix.tokens {sp.tokens} is not shorter than input_tokens ({shown}): input_tokens is the "
                f"whole prompt, the shared prefix included (unlike vllm bench, which adds the prefix to the input "
                f"length); give input_tokens above {sp.tokens} (the prefix + each request's own tokens) or a "
                "shorter prefix"
            )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("input_tokens", "output_tokens"):
                if key in data:
                    data[key] = length_shorthand(data[key])
        return data


class Workload(Strict):
    classes: Annotated[list[RequestClass], Field(min_length=1)]
    adapters: Annotated[Adapters | None, AfterValidator(_unique_adapters)] = Field(
        default=None,
        description="LoRA adapters: each request's `model` is one of these names, drawn by weight "
        "([{name, weight}]) or by Zipf popularity ({names: [...], zipf: s}); a session keeps its adapter",
    )
    tokenizer: str | None = Field(
        default=None,
        description="Path to a local tokenizer (a tokenizer.json file or a directory holding one). "
        "Without it the built-in word tokenizer (the simulated engine's) sizes prompts.",
    )
    token_scale: Annotated[float, Field(gt=0.05, le=20)] | None = Field(
        default=None,
        description="The target's tokens per built-in word, measured with its POST /tokenize when no tokenizer is given: "
        "built-in prompts then carry about input_tokens of the target's tokens. `harness run` sets it; recorded, not "
        "part of the fingerprint.",
    )
    prompt_salt: Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description="Varies the prompts' words (not their lengths, classes or shared-prefix structure), so a "
        "server's prefix cache from an earlier run with the same seed cannot serve them. `harness run` sets it "
        "when the target's prefix cache cannot be reset. Not part of the fingerprint.",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> Workload:
        names = [c.name for c in self.classes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"class names must be unique; repeated: {', '.join(dupes)}")
        return self


# ---------------------------------------------------------------- load
class Trace(Strict):
    """Arrival times recorded in production, replayed with their burst pattern.

    A JSONL file (one object per line with the timestamp in `field`) or a text file of one number
    per line. The gaps are scaled so their mean rate is `load.rate`: the shape comes from the
    trace, the level from the scenario (replay at 1x by setting rate to the trace's own rate)."""

    path: Annotated[str, Field(min_length=1)] = Field(description="relative to the scenario file")
    field: Annotated[str, Field(min_length=1)] = "timestamp"
    unit: Literal["s", "ms", "us"] = "s"


class Load(Strict):
    """Closed loop (`concurrency`), open loop (`rate` with an arrival process), or offline
    (`offline: true`: all `requests` submitted at once, the engine drains them at its own pace)."""

    offline: bool = False
    concurrency: Annotated[int, Field(gt=0), _within(limits.CONCURRENCY)] | None = None
    rate: Annotated[float, Field(gt=0)] | None = None
    arrival: ArrivalName = "poisson"  # one module per pattern in harness/workload/arrivals
    trace: Trace | None = None
    burstiness: Annotated[float, Field(gt=0)] = 1.0
    max_in_flight: Annotated[int, Field(gt=0), _within(limits.IN_FLIGHT)] = 1024
    ramp_s: Annotated[Seconds, Field(ge=0)] = 0.0
    duration_s: Annotated[Seconds, Field(gt=0), _within(limits.DURATION)] | None = None
    requests: Annotated[int, Field(gt=0)] | None = None

    _duration_key = model_validator(mode="before")(rename_duration_key)

    @model_validator(mode="after")
    def _mode(self) -> Load:
        if self.offline:
            if self.concurrency is not None or self.rate is not None:
                raise ValueError("offline submits every request at once; remove concurrency and rate")
            if self.requests is None:
                raise ValueError("offline needs requests: N (how many to submit at once)")
            return self
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("set exactly one of concurrency (closed loop) or rate (open loop)")
        if self.duration_s is None and self.requests is None:
            raise ValueError("set duration_s or requests (or both: whichever comes first)")
        if self.arrival == "trace" and (self.trace is None or self.rate is None):
            raise ValueError(
                "arrival trace needs trace: {path: ...} and a rate (the trace's gaps are scaled to that mean rate)"
            )
        if self.trace is not None and self.arrival != "trace":
            raise ValueError("trace is read only with arrival: trace; set it, or remove trace")
        return self

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    # Locust users and their spawn rate are defined here and only here: the load processes
    # (harness.load.main, the distributed master), the web UI's form defaults and `harness run -r`
    # all ask these.
    @property
    def users(self) -> int:
        """Streams the load holds open at most: closed-loop users, open-loop in-flight cap, or
        every request at once (offline). Locust runs one user per stream."""
        if self.offline:
            return self.requests or 1
        return self.concurrency if self.concurrency is not None else self.max_in_flight

    def spawn_rate(self, users: int | None = None) -> float:
        """Locust's spawn rate (users started per second) for `users` of this load (default: all
        of them): spread over ramp_s, except in open loop, where the arrival schedule paces the
        requests and every user of the pool starts at once."""
        n = self.users if users is None else users
        return n / self.ramp_s if (self.ramp_s > 0 and not self.open_loop) else float(n)

    def users_of(self, worker: int, workers: int) -> int:
        """Load process `worker` of `workers`: its share of the users (at least one)."""
        return max(1, self.users // workers + (1 if worker < self.users % workers else 0))

    def ramp_for(self, spawn_rate: float) -> float:
        """The ramp_s that starts this load's users at `spawn_rate` a second (Locust's -r)."""
        return self.users / spawn_rate


class Warmup(Strict):
    """Traffic sent before measuring; excluded from every result."""

    duration_s: Annotated[Seconds, Field(ge=0), _within(limits.DURATION)] = 0.0
    requests: Annotated[int, Field(ge=0)] = 0

    _duration_key = model_validator(mode="before")(rename_duration_key)


class Sampling(Strict):
    temperature: Annotated[float, Field(ge=0)] = 0.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    ignore_eos: bool = True
    seed: int | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)


class Target(Strict):
    url: str | None = Field(default=None, description="Base URL; none = start the built-in simulated engine")
    api: ApiName = "openai-chat"  # one module per API in harness/client/adapters
    model: str | None = Field(default=None, description="Model name; none = the first of /v1/models")
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = Field(
        default=None, description="Name of the environment variable holding the API key (never the key)"
    )
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: Annotated[Seconds, Field(gt=0)] | None = Field(
        default=None, description="per-request timeout; none = scaled to the run (harness.load.deadlines)"
    )
    continuous_usage: Literal["auto", "on", "off"] = "auto"
    endpoints: Annotated[list[str], Field(min_length=1, max_length=64)] | None = Field(
        default=None, description="several replicas behind one benchmark: base URLs (instead of url)"
    )
    routing: Literal["round-robin", "least-outstanding", "session-affinity", "prefix-affinity", "adapter-affinity"] = (
        Field(default="round-robin", description="how requests are spread over endpoints (harness.load.routing)")
    )
    replicas: Annotated[int, Field(ge=1, le=16)] = Field(
        default=1, description="with no url/endpoints: start this many built-in simulated engines as the fleet"
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return None if v is None else check_url(v)

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        urls = [check_url(u) for u in v]
        dupes = sorted({u for u in urls if urls.count(u) > 1})
        if dupes:
            raise ValueError(f"endpoints must differ; repeated: {', '.join(dupes)}")
        return urls

    @model_validator(mode="after")
    def _one_target(self) -> Target:
        if self.endpoints is not None and self.url is not None:
            raise ValueError("set url (one server) or endpoints (a fleet), not both")
        if self.replicas > 1 and (self.endpoints is not None or self.url is not None):
            raise ValueError("replicas starts built-in simulators; remove it, or remove url/endpoints")
        return self

    @property
    def fleet(self) -> list[str] | None:
        return self.endpoints

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            check_header(name, value)
        return v


class Telemetry(Strict):
    enabled: bool = True
    metrics_url: str | None = Field(default=None, description="default: <target>/metrics")
    interval_s: Annotated[Seconds, Field(gt=0)] = 1.0
    timeout_s: Annotated[Seconds, Field(gt=0, le=60)] = Field(
        default=10.0, description="per-scrape timeout (Prometheus' default); a busy engine's /metrics can take seconds"
    )
    profile: str | None = Field(default=None, description="engine profile; none = detect")
    prometheus: str | None = Field(default=None, description="query this Prometheus server instead")
    selector: str | None = Field(default=None, description='PromQL label selector, e.g. job="vllm"')
    nvml: bool = True


class Scenario(Strict):
    # max_length: the name is part of the default run directory's name (a file name: <= 255 bytes)
    name: Annotated[str, Field(min_length=1, max_length=120, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    seed: Annotated[int, Field(ge=0, lt=2**64)] = 0  # numpy's generators take no negative seed
    target: Target = Field(default_factory=Target)
    load: Load
    workload: Workload
    sampling: Sampling = Field(default_factory=Sampling)
    slo: SLO = Field(default_factory=SLO)
    warmup: Warmup = Field(default_factory=Warmup)
    telemetry: Telemetry = Field(default_factory=Telemetry)
    quality: QualitySpec | None = Field(default=None, description="output-quality check (harness quality; sweeps)")
    thresholds: list[str] = Field(
        default_factory=list,
        description='conditions that fail the run (exit 99), e.g. "error_rate>1%", or "invalid" (validity warnings)',
    )

    @model_validator(mode="before")
    @classmethod
    def _trace_arrivals(cls, data: Any) -> Any:
        """`load.arrival: trace` with a block_trace class and no `load.trace`: the arrivals are the
        block trace's own timestamps (the file is named once)."""
        if not isinstance(data, dict):
            return data
        load, workload = data.get("load"), data.get("workload")
        if not (
            isinstance(load, dict)
            and load.get("arrival") == "trace"
            and load.get("trace") is None
            and isinstance(workload, dict)
            and isinstance(workload.get("classes"), list)
        ):
            return data
        traces = [
            c["block_trace"]
            for c in workload["classes"]
            if isinstance(c, dict) and isinstance(c.get("block_trace"), dict)
        ]
        if len(traces) == 1 and isinstance(traces[0].get("path"), str):
            bt = traces[0]
            data = {
                **data,
                "load": {**load, "trace": {"path": bt["path"], "field": "timestamp", "unit": bt.get("unit", "ms")}},
            }
        return data

    @model_validator(mode="after")
    def _one_trace_class(self) -> Scenario:
        classes = self.workload.classes
        if any(c.block_trace is not None for c in classes) and len(classes) > 1:
            raise ValueError(
                "workload.classes: a block_trace class replays the trace request by request and must be "
                "the only class; run other classes in another scenario"
            )
        return self

    @field_validator("thresholds")
    @classmethod
    def _thresholds(cls, value: list[str]) -> list[str]:
        from harness.scenario.thresholds import parse

        for text in value:
            parse(text)
        return value

    def has_slo(self) -> bool:
        """Whether any SLO limit is set (scenario-wide or per class); without one, 'goodput' is
        just the completed requests and is not worth printing as a separate figure."""
        return any(v is not None for v in self.slo.model_dump().values()) or any(
            c.slo is not None and any(v is not None for v in c.slo.model_dump().values()) for c in self.workload.classes
        )

    def slo_for(self, class_name: str) -> SLO:
        for cls in self.workload.classes:
            if cls.name == class_name:
                return self.slo.merged(cls.slo)
        return self.slo
