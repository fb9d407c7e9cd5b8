"""``python -m lpmpi.tune``: the same as ``lpmpi-tune`` (run under mpiexec)."""
import sys

from lpmpi.tune.cli import main

sys.exit(main())
