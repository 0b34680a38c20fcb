"""The engine log over the window: lines counted by kind with the engine kind's pattern table."""

from __future__ import annotations

from pathlib import Path

from harness.diagnose.base import DiagnoseOptions, RunInputs
from harness.diagnose.enginelog import EngineLog, LogWindow
from harness.results.models import RunSummary

BEFORE = "(EngineCore_DP0 pid=1) WARNING 12-01 10:00:00 [backends.py:212] Recompiling function forward in x.py: batch size 9 is not in the CUDA graph capture sizes (largest 8)\n"
DURING = [
    "(EngineCore_DP0 pid=1) WARNING 12-01 10:00:05 [backends.py:212] Recompiling function forward in x.py: batch size 12 is not in the CUDA graph capture sizes (largest 8)",
    "W0716 01:10:47.676000 567101 torch/_dynamo/convert_frame.py:984] [0/8] torch._dynamo hit config.recompile_limit (8)",
    "(APIServer pid=1) INFO 12-01 10:00:06 [async_llm.py:400] Aborted request chatcmpl-abc.",
    "WARNING 12-01 10:00:07 scheduler.py:1560] Sequence group 5 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 150.00 MiB.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "(APIServer pid=1) INFO 12-01 10:00:08 [loggers.py:257] Engine 000: Avg prompt throughput: 1.0 tokens/s",
]


def test_counts_only_the_window_with_first_lines(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text(BEFORE)
    w = LogWindow(log)
    w.mark_start()
    with log.open("a") as fh:
        fh.write("\n".join(DURING) + "\n")
    w.mark_end()
    with log.open("a") as fh:
        fh.write(BEFORE)  # after the window: not counted
    opts = DiagnoseOptions(engine_log=log, log_window=w.span, engine_kind="sim")
    block = EngineLog().analyze(RunInputs(root=tmp_path, summary=RunSummary(), options=opts))
    ev = block["events"]
    assert block["scope"] == "measured window" and block["patterns"] == "vllm"
    assert ev["recompilation"]["count"] == 2 and "batch size 12" in ev["recompilation"]["first"]
    assert ev["abort"]["count"] == 1 and ev["preemption"]["count"] == 1
    assert ev["oom"]["count"] == 1 and ev["cuda_error"]["count"] == 1
    assert block["warnings"][0].startswith("2 recompilations during the window: shapes not covered")


def test_missing_log_is_said_not_raised(tmp_path: Path):
    opts = DiagnoseOptions(engine_log=tmp_path / "gone.log")
    block = EngineLog().analyze(RunInputs(root=tmp_path, summary=RunSummary(), options=opts))
    assert "cannot read the engine log" in block["missing_reason"]
