"""The contract in every form: the test matrices of tests/mpi_cases.py (results against numpy,
bitwise identity across ranks, in place, recvbuf=None, buffer kinds, errors before any
communication with nothing written, LPMPI_CHECK, COMM_SELF/Dup/Split/Create, message splitting,
determinism, the emulated device path) run with every collective made nonblocking
(``lpmpi.iallreduce(...).wait()``) and persistent (``allreduce_init``, ``start()`` +
``wait()``, restarted where not in place), at P = 1..5.  P >= 3 oversubscribe the 2-core
machine: those spawns run a deterministic sample of the cases (--stride), each form its own."""
import pytest
from _mpi import NPROCS, run_suite

pytestmark = pytest.mark.mpi

FORMS = ("nonblocking", "persistent")
EMU = {"LPMPI_EMULATE_STAGING": "1"}


@pytest.mark.parametrize("nprocs", NPROCS, ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
@pytest.mark.parametrize("form", FORMS)
def test_matrix(form, suite, nprocs):
    stride = {1: 2, 2: 1, 3: 2, 4: 4, 5: 6}[nprocs]
    run_suite(suite, nprocs, "--form", form, "--stride", str(stride))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("suite,nprocs,stride,extra", [
    ("comms", 2, 1, {}), ("comms", 4, 4, {}),
    ("errors", 1, 1, {}), ("errors", 3, 1, {}), ("errors", 2, 1, {"LPMPI_CHECK": "1"}),
    ("check", 3, 2, {"LPMPI_CHECK": "1"}),
    ("bigmsg", 2, 1, {"LPMPI_MAX_MSG_BYTES": "64"}), ("bigmsg", 5, 5, {"LPMPI_MAX_MSG_BYTES": "48"}),
    ("determinism", 2, 2, {}), ("determinism", 3, 4, {}),
], ids=lambda v: str(v) if not isinstance(v, dict) else "-".join(v) or "plain")
def test_suites(form, suite, nprocs, stride, extra):
    run_suite(suite, nprocs, "--form", form, "--stride", str(stride), env=extra or None)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("nprocs", (2, 3, 5), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_emulated_staging(form, suite, nprocs):
    """The staged device path (LP's staged pipeline, whole-buffer staging) in every form."""
    run_suite(suite, nprocs, "--form", form, "--stride", str({2: 3, 3: 4, 5: 8}[nprocs]), env=EMU)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("suite,nprocs,extra", [
    ("allreduce", 2, {}), ("device", 2, {}), ("reduce", 3, {"LPMPI_CUDA_AWARE": "1"}),
    ("allreduce", 3, {"LPMPI_CUDA_AWARE": "1"}),
], ids=lambda v: str(v) if not isinstance(v, dict) else "-".join(v) or "staged")
def test_fake_device(form, suite, nprocs, extra):
    """Device arrays (__cuda_array_interface__ over host memory) and the CUDA-aware routing."""
    backend = ("--backend", "fakedev") if suite in ("allreduce", "device") and not extra else ()
    run_suite(suite, nprocs, *backend, "--form", form, "--stride", "1" if suite == "device" else "4",
              env={**EMU, **extra})

