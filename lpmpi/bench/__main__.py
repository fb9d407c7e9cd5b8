"""``python -m lpmpi.bench``: the benchmark's command line (:func:`lpmpi.bench.cli.main`)."""
import sys

from lpmpi.bench.cli import main

sys.exit(main())
