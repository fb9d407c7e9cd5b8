"""``python -m tuner``: the same as ``lpmpi-tune`` (run under mpiexec)."""
import sys

from tuner.cli import main

sys.exit(main())
