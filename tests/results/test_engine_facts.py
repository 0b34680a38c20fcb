"""Engine startup facts in words, and the max_model_len check against what a scenario asks for."""

from harness.results.engine_facts import facts_line, facts_lines, max_len_warning, workload_max_len
from harness.results.models.facts import StartupFacts as F
from harness.results.models.sweep import Cell
from harness.scenario.models import Scenario


def _scenario(inp, out, prefix=None) -> Scenario:
    cls = {"name": "a", "input_tokens": inp, "output_tokens": out}
    if prefix:
        cls["shared_prefix"] = {"tokens": prefix}
    return Scenario.model_validate(
        {"name": "s", "workload": {"classes": [cls]}, "load": {"concurrency": 1, "requests": 1}}
    )


def test_facts_line_says_what_the_engine_runs_with():
    facts = F(
        attention_backend="FLASH_ATTN",
        cudagraph_count=7,
        cudagraph_sizes=[1, 2, 4, 8, 16, 24, 32],
        cudagraph_mode="FULL_AND_PIECEWISE",
        max_model_len=49680,
        max_model_len_auto_fit_from=131072,
        quantization="fp8",
        kv_cache_dtype="fp8",
        compile_cache_hit=True,
        engine_version="0.32.0",
    )
    assert facts_line(facts) == (
        "attention FLASH_ATTN · 7 CUDA graphs 1-32 FULL_AND_PIECEWISE · max_model_len 49,680 "
        "(auto-fit from 131,072) · quantization fp8 · KV fp8 · compile cache hit · version 0.32.0"
    )
    assert facts_line(F(cudagraph_count=0, cudagraph_mode="NONE", enforce_eager=True)) == "no CUDA graphs (eager)"
    assert facts_line(F(cudagraph_count=0, cudagraph_mode="NONE")) == "no CUDA graphs (mode NONE)"  # the CPU build
    assert facts_line(F()) == ""


def test_workload_max_len_is_the_longest_request_or_none_when_unbounded():
    assert workload_max_len(_scenario(512, 128)) == 640
    # input_tokens includes the shared prefix (harness/workload/generator.py): not added again
    assert workload_max_len(_scenario({"dist": "uniform", "min": 10, "max": 900}, 100, prefix=50)) == 1000
    assert workload_max_len(_scenario({"dist": "lognormal", "mean": 300, "max": 900}, 100, prefix=50)) == 1000
    assert workload_max_len(_scenario({"dist": "lognormal", "mean": 300}, 100)) is None


def test_warning_only_when_the_final_length_is_below_the_need():
    s = _scenario(4000, 200)
    fitted = {"max_model_len": 2048, "max_model_len_auto_fit_from": 131072}
    warning = max_len_warning(F(**fitted), s, "long")
    assert warning.startswith(
        "max_model_len is 2,048 (auto-fit reduced it from 131,072 to fit the KV cache) but scenario long asks for up to 4,200"
    )
    assert max_len_warning(F(max_model_len=8192), s) is None
    assert max_len_warning(F(), s) is None
    lines = facts_lines(
        [
            Cell(
                id="a__s__r1",
                config_id="a",
                scenario="s",
                status="complete",
                startup_facts=F(**fitted, max_model_len_warning=warning),
            )
        ]
    )
    assert lines[1] == "  a: max_model_len 2,048 (auto-fit from 131,072)" and lines[2] == f"    ! {warning}"
