"""`harness startup FILE`: cold and warm engine starts per config, timed by phase (issue 14 §2).

A startup file is a sweep file's engine/base/vary plus how many cold and warm starts to make;
configs, engine kinds and the launcher are the sweep's (harness/sweep). Optionally a scenario is
measured after the last warm start, through the sweep executor's cell run, so the report can set
the startup saved by a config (--enforce-eager, a smaller --max-num-seqs) against the steady-state
throughput it costs.
"""
