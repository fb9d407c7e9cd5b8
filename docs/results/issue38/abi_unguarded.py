# lpmpi's engine imported behind lpmpi/__init__.py's back (no ABI check: what an lpmpi without
# it did), where mpi4py loaded Open MPI; then one allreduce on COMM_WORLD
import sys
import types

from mpi4py import MPI

root = sys.argv[1]
pkg = types.ModuleType("lpmpi")
pkg.__path__ = [root + "/lpmpi"]
sys.modules["lpmpi"] = pkg                  # the package without its __init__ (and its check)
from lpmpi import _abi

print("before the engine, libmpi mapped:", _abi.loaded_libmpi(), flush=True)
try:
    from lpmpi import _core
except ImportError as e:
    print("ImportError:", e, flush=True)
    sys.exit(1)
print("after the engine, libmpi mapped:", _abi.loaded_libmpi(), flush=True)
import numpy as np

print("allreduce on COMM_WORLD ...", flush=True)
print(_core.allreduce(np.ones(4), None, "sum", MPI.COMM_WORLD), flush=True)
