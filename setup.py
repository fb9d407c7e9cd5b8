"""Build of lpmpi: the C engine (src/) and the Cython bindings, compiled against the MPI
library whose compiler wrapper is found first: $MPICC, else the mpicc that the `mpich`
wheel puts next to the build's Python, else mpicc on PATH."""
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent.resolve()


def find_mpicc():
    cand = [os.environ.get("MPICC"), str(Path(sys.executable).parent / "mpicc"),
            str(Path(sys.prefix) / "bin" / "mpicc"), shutil.which("mpicc")]
    for c in cand:
        if c and (shutil.which(c) or Path(c).is_file()):
            return c
    sys.exit("lpmpi: no MPI compiler wrapper found; install the `mpich` wheel or set MPICC")


def mpi_flags(mpicc):
    """-I/-L/-l flags of the MPI library, from `mpicc -show` (MPICH) or `--showme` (Open MPI).
    Build-environment rpaths are dropped: at run time mpi4py loads libmpi first."""
    for opt in ("-show", "--showme"):
        try:
            out = subprocess.run([mpicc, opt], capture_output=True, text=True, check=True).stdout
            break
        except (subprocess.CalledProcessError, OSError):
            continue
    else:
        sys.exit(f"lpmpi: cannot ask {mpicc} for its flags")
    inc, libdirs, libs = [], [], []
    for tok in shlex.split(out)[1:]:
        if tok.startswith("-I"):
            inc.append(tok[2:])
        elif tok.startswith("-L"):
            libdirs.append(tok[2:])
        elif tok.startswith("-l"):
            libs.append(tok[2:])
    return inc, libdirs, libs


def extensions():
    import mpi4py
    import numpy
    from Cython.Build import cythonize

    mpicc = find_mpicc()
    inc, libdirs, libs = mpi_flags(mpicc)
    print(f"lpmpi: MPI from {mpicc}: include {inc}, libs {libs}")
    sources = ["lpmpi/_core.pyx"] + sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.c"))
    ext = Extension(
        "lpmpi._core",
        sources=sources,
        include_dirs=["src", numpy.get_include(), mpi4py.get_include()] + inc,
        library_dirs=libdirs,
        libraries=libs,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wno-unused-function"],
        # the mpich wheel's libmpi lives in <env>/lib; the extension in <env>/lib/pythonX/site-packages/lpmpi
        extra_link_args=["-Wl,-rpath,$ORIGIN/../../.."],
    )
    return cythonize([ext], language_level=3, include_path=[mpi4py.get_include()])


def install_requires():
    reqs = ["numpy>=1.23,<3", "mpi4py>=4.0,<5"]
    if not os.environ.get("MPICC"):  # default MPI: MPICH from PyPI
        reqs.append("mpich>=4.2,<6")
    return reqs


setup(ext_modules=extensions(), install_requires=install_requires())
