"""lpmpi's autotuner: Optuna studies that pick algorithm and chunk size per collective, message
size and process count, and write a tuning table that "auto" loads at import.

    mpiexec -n 2 lpmpi-tune --collectives allreduce,bcast,reduce --min-bytes 8 --max-bytes 64MiB \\
        --storage sqlite:///tune.db --out table.json

(also ``python -m lpmpi tune`` or ``python -m lpmpi.tune``).  Optuna is needed only here
(``pip install 'lpmpi[tune]'``); ``import lpmpi`` imports neither it nor this package.
See docs/tuning.md.
"""
