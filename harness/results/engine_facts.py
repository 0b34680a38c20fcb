"""What an engine's startup log says, in words: the facts the tuning guides tell the user to check
(attention backend, CUDA-graph sizes and mode, the final max_model_len, quantization, KV-cache
dtype, engine version, compile cache), for the sweep's progress line, closing table and report.

`max_len_warning` compares the final max_model_len with what the scenario can ask for: vLLM's
auto-fit (`--max-model-len auto`) silently shrinks the length to what the KV cache holds, and
requests longer than that are rejected with a 400 at run time.
"""

from __future__ import annotations

from harness.results.models.facts import FactNum, StartupFacts
from harness.results.models.sweep import Cell
from harness.scenario.models import Scenario


def _sizes_text(facts: StartupFacts) -> str | None:
    count = facts.cudagraph_count
    if count is None:
        return None
    mode = facts.cudagraph_mode
    if count == 0:
        if facts.enforce_eager:
            return "no CUDA graphs (eager)"
        return "no CUDA graphs" + (f" (mode {mode})" if mode else "")
    sizes = facts.cudagraph_sizes or []
    span = f" {sizes[0]}-{sizes[-1]}" if sizes else ""
    return f"{count} CUDA graphs{span}" + (f" {mode}" if mode else "")


def _thousands(v: FactNum) -> str:
    return f"{v:,}" if isinstance(v, (int, float)) else str(v)


def facts_line(facts: StartupFacts) -> str:
    """One line of the facts that tell what the engine is really running with ('' when none)."""
    bits = []
    if facts.attention_backend:
        bits.append(f"attention {facts.attention_backend}")
    sizes = _sizes_text(facts)
    if sizes:
        bits.append(sizes)
    if facts.max_model_len is not None:
        text = f"max_model_len {_thousands(facts.max_model_len)}"
        if facts.max_model_len_auto_fit_from:
            text += f" (auto-fit from {_thousands(facts.max_model_len_auto_fit_from)})"
        bits.append(text)
    if facts.quantization:
        bits.append(f"quantization {facts.quantization}")
    if facts.kv_cache_dtype and facts.kv_cache_dtype != "auto":
        bits.append(f"KV {facts.kv_cache_dtype}")
    if "compile_cache_hit" in facts.model_fields_set and facts.compile_cache_hit is not None:
        bits.append("compile cache hit" if facts.compile_cache_hit else "compiled (cache miss)")
    if facts.engine_version:
        bits.append(f"version {facts.engine_version}")
    return " · ".join(bits)


def workload_max_len(scenario: Scenario) -> int | None:
    """The longest prompt + output a scenario's generated classes can ask for (harness.workload.
    context, the generator's rules: a shared prefix is part of input_tokens, never longer than
    the prompt minus one token); None when a class's lengths have no upper bound or come from
    files (a dataset, a session)."""
    from harness.workload.context import plain_class

    longest = 0
    for cls in scenario.workload.classes:
        if cls.dataset is not None or cls.session is not None:
            return None
        total = plain_class(cls).total
        if total is None:
            return None
        longest = max(longest, total)
    return longest or None


def max_len_warning(facts: StartupFacts, scenario: Scenario, name: str = "") -> str | None:
    final = facts.max_model_len
    need = workload_max_len(scenario)
    if not isinstance(final, int) or need is None or final >= need:
        return None
    why = (
        f"auto-fit reduced it from {_thousands(facts.max_model_len_auto_fit_from)} to fit the KV cache"
        if facts.max_model_len_auto_fit_from
        else "as configured"
    )
    raise_flag = (
        "--kv-cache-memory-bytes (it sets the KV cache's size and overrides --gpu-memory-utilization)"
        if facts.kv_cache_set_by == "kv_cache_memory_bytes"
        else "--gpu-memory-utilization"
    )
    return (
        f"max_model_len is {final:,} ({why}) but scenario {name or 'the scenario'} asks for up to {need:,} "
        f"tokens: longer requests are rejected; raise {raise_flag} or set --max-model-len "
        "and lower --max-num-seqs"
    )


def facts_lines(entries: list[Cell]) -> list[str]:
    """The sweep's closing lines: per config, the engine facts of its (first) start."""
    seen: dict[str, StartupFacts] = {}
    for e in entries:
        if e.startup_facts.model_fields_set and e.config_id not in seen:
            seen[e.config_id] = e.startup_facts
    rows = [(cid, facts_line(f), f.max_model_len_warning) for cid, f in seen.items()]
    rows = [r for r in rows if r[1] or r[2]]
    if not rows:
        return []
    lines = ["engine startup facts (from each config's log)"]
    for cid, line, warning in rows:
        lines.append(f"  {cid}: {line}")
        if warning:
            lines.append(f"    ! {warning}")
    return lines
