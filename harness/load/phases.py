"""The run controller's phases (harness.load.controller re-exports them): warmup -> measure ->
drain -> done."""

WARMUP, MEASURE, DRAIN, DONE = "warmup", "measure", "drain", "done"
