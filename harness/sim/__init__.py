"""The built-in simulated engine: a vLLM-like OpenAI server that behaves like a loaded GPU.

Run it with `harness sim --port 8000 [vLLM flags]` or `python -m harness.sim ...`; the entry
point is `harness.sim.cli.main(argv) -> int`. Modules:

* `cli` / `config` - flags (vLLM spellings plus `--sim-*`, `--scripted-*`, `--fault-*`);
* `memory` - KV-cache sizing and vLLM-like startup errors; `costmodel` - step time;
* `kv_cache` - block allocator with hash-chained prefix caching and LRU eviction;
* `engine` - continuous-batching scheduler loop; `scripted` - fixed TTFT/ITL schedules;
* `server` - aiohttp endpoints, startup log lines, faults; `sse` - SSE framing;
* `metrics` - vLLM's Prometheus metrics; `trace` - ground-truth write times; `loop` - precise timers.
"""
