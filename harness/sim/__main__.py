"""`python -m harness.sim [flags]`: run the simulated engine."""

import sys

from harness.sim.cli import main

sys.exit(main(sys.argv[1:]))
