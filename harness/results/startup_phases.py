"""One start's time to ready, split into the phases its log tells, so that they add up.

    load       weight loading                    (Model loading took; CPU: Initializing model + Loading weights)
    compile    torch.compile, or the CPU build's compile warmup (its stamps)
    kv_profile profiling run and KV-cache allocation: engine init minus compile and capture
    capture    CUDA-graph capture                (the tqdm bars' n / rate; else Graph capturing finished in)
    rest       everything else until /health answered: process start, imports, API server

Engine init (`init engine (profile, create kv cache, warmup model) took`) is compile + kv_profile +
capture. A phase the log does not tell is absent (None), and its time stays in `rest`; nothing is
ever counted twice, so the phases always add up to the measured time to ready.
"""

from __future__ import annotations

from harness.results.models.facts import StartupFacts

PHASES = ("load", "compile", "kv_profile", "capture", "rest")
LABELS = {
    "load": "weight loading",
    "compile": "compilation",
    "kv_profile": "KV profiling/allocation",
    "capture": "graph capture",
    "rest": "process, API server, rest",
}


def _first(*values: object) -> float | None:
    """The first of the facts that is a number (a log's text that did not parse is not)."""
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def _load(facts: StartupFacts) -> float | None:
    """`Model loading took` (GPU) covers it all; the CPU build logs model init and weights apart."""
    whole = _first(facts.model_load_s)
    if whole is not None:
        return whole
    parts = [v for v in (_first(facts.weights_load_s), _first(facts.init_model_s)) if v is not None]
    return sum(parts) if parts else None


def _compile(facts: StartupFacts) -> float | None:
    return _first(facts.torch_compile_s, facts.compile_s, facts.warmup_compile_s)


def _capture(facts: StartupFacts) -> float | None:
    return _first(facts.graph_capture_bars_s, facts.graph_capture_s)


def split(facts: StartupFacts, ready_s: float) -> dict[str, float | None]:
    load = _load(facts)
    compile_s = _compile(facts)
    capture = _capture(facts)
    init = _first(facts.init_engine_s)
    kv = None
    if init is not None:
        inner = (compile_s or 0.0) + (capture or 0.0)
        if inner > init:  # rounding ("finished in 3 secs"): trust the engine-init total
            scale = init / inner
            compile_s = None if compile_s is None else compile_s * scale
            capture = None if capture is None else capture * scale
            inner = init
        kv = init - inner
        engine = init
    else:
        engine = (compile_s or 0.0) + (capture or 0.0)
    counted = (load or 0.0) + engine
    if counted > ready_s:  # a log that claims more than the clock saw: shrink it to fit
        scale = ready_s / counted if counted else 0.0
        load, compile_s, kv, capture = (None if v is None else v * scale for v in (load, compile_s, kv, capture))
        counted = ready_s
    return {"load": load, "compile": compile_s, "kv_profile": kv, "capture": capture, "rest": ready_s - counted}


def engine_init(facts: StartupFacts) -> float | None:
    return _first(facts.init_engine_s)


def logged_s(facts: StartupFacts) -> float:
    """Seconds the log itself accounts for (weight loading + engine init); never more than the
    measured time to ready when the log and the clock agree."""
    load = _load(facts) or 0.0
    init = _first(facts.init_engine_s)
    if init is None:
        init = (_compile(facts) or 0.0) + (_capture(facts) or 0.0)
    return load + init
