"""The root-cause line of a failed engine start, for every kind (harness.engines.failure_hint)."""

from harness.engines import failure_hint

from .conftest import DATA


def test_failure_hint_real_vllm_failed_start():
    hint = failure_hint((DATA / "vllm" / "vllm_cpu_0.32_failed_start.log").read_text())
    assert hint.startswith("ValueError: To serve at least one request with the model's max seq len (2048)")


def test_failure_hint_other_shapes():
    assert failure_hint("usage: vllm serve [-h]\nvllm serve: error: unrecognized arguments: --bogus 1\n") == (
        "vllm serve: error: unrecognized arguments: --bogus 1"
    )
    assert failure_hint("Traceback (most recent call last):\nRuntimeError: Engine core initialization failed.") == (
        "RuntimeError: Engine core initialization failed."
    )
    assert failure_hint("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n").startswith(
        "torch.OutOfMemoryError"
    )
    assert failure_hint("all good\n") is None
