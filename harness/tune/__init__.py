"""`harness tune`: the tuning guides' repeatable procedure as steps driving sweeps.

One step module per guide step (harness/tune/steps/), registered by name; the driver walks them
in the guide's order, holding the other flags at the current best, and every measurement is a
normal sweep (harness/sweep) so resume, run directories and reports are the sweep's own.
"""
