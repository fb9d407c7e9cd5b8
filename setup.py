"""Build of lpmpi: the C engine (src/) and the Cython bindings, compiled against the MPI
library whose compiler wrapper is found first: $MPICC, else the mpicc that the `mpich`
wheel puts next to the build's Python, else mpicc on PATH.

CUDA (the one optional feature): when nvcc and the CUDA headers are found ($NVCC, else
$CUDA_HOME/bin/nvcc, else nvcc on PATH), src/device/cuda/*.cu are compiled and linked with the static
CUDA runtime, so the module imports on machines without a GPU or driver; the package then
accepts device arrays.  LPMPI_CUDA=0 builds without, LPMPI_CUDA=1 fails when nvcc is missing;
LPMPI_CUDA_ARCHS="80;90" sets the real architectures (PTX for the last one is added)."""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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


# ---------------------------------------------------------------- the build's MPI, recorded
# lpmpi/_build_mpi.py (generated, git-ignored): which MPI the engine is built against, for the
# check `import lpmpi` runs before it imports the engine (lpmpi/_abi.py: an ImportError naming
# both libraries when mpi4py loaded another ABI family, instead of a crash or a second libmpi).
def _abi_module():
    """lpmpi/_abi.py, loaded by path (it imports only the standard library)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_lpmpi_abi", HERE / "lpmpi" / "_abi.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mpi_macros(mpicc):
    """The macros mpi.h defines, as `mpicc -E -dM` sees them ({} when it cannot say)."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "h.c"
        src.write_text("#include <mpi.h>\n")
        try:
            out = subprocess.run([mpicc, "-E", "-dM", str(src)], capture_output=True, text=True,
                                 timeout=120, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return {}
    macros = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0] == "#define":
            macros[parts[1]] = parts[2].strip().strip('"') if len(parts) > 2 else ""
    return macros


def mpi_version_text(mpicc):
    """MPI_Get_library_version() of the library mpicc links (a small program, compiled and run
    without MPI_Init), or None where that fails (e.g. a cross build)."""
    prog = ("#include <mpi.h>\n#include <stdio.h>\nint main(void) { char v[MPI_MAX_LIBRARY_VERSION_STRING];"
            " int n = 0; MPI_Get_library_version(v, &n); fputs(v, stdout); return 0; }\n")
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "v.c", Path(d) / "v"
        src.write_text(prog)
        try:
            subprocess.run([mpicc, str(src), "-o", str(exe)], capture_output=True, timeout=120, check=True)
            out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    return out.replace("\x00", "").strip() or None


def mpi_record(mpicc, libdirs, soname):
    """The build record: the ABI family, library, version text, mpicc and libmpi soname/path."""
    abi = _abi_module()
    m = mpi_macros(mpicc)
    text = mpi_version_text(mpicc)
    if "MPI_ABI_VERSION" in m:           # the MPI 5 standard ABI's mpi.h (e.g. MPICH's mpicc_abi)
        family = abi.MPIABI
    elif "OMPI_MAJOR_VERSION" in m:
        family = abi.OPENMPI
    elif any(k in m for k in ("MPICH_VERSION", "I_MPI_VERSION", "MVAPICH2_VERSION", "MVAPICH_VERSION")):
        family = abi.MPICH
    else:
        family = abi.abi_of_soname(soname) or (abi.abi_of_version(text) if text else None)
    if text:
        library = abi.short_name(text)
    elif "OMPI_MAJOR_VERSION" in m:
        library = "Open MPI {}.{}.{}".format(*(m.get(f"OMPI_{k}_VERSION", "?") for k in ("MAJOR", "MINOR", "RELEASE")))
    else:
        library = next((f"{name} {m[k]}" for k, name in (("I_MPI_VERSION", "Intel MPI"), ("MVAPICH2_VERSION", "MVAPICH2"),
                        ("MVAPICH_VERSION", "MVAPICH"), ("MPICH_VERSION", "MPICH")) if k in m), "an unknown MPI library")
    libmpi = next((str(Path(d) / soname) for d in libdirs if soname and (Path(d) / soname).exists()), None)
    return {"abi": family, "library": library, "version_line": abi.first_line(text) if text else None,
            "version_text": text, "mpicc": str(mpicc), "soname": soname, "libmpi": libmpi,
            "macros": {k: m[k] for k in ("MPI_VERSION", "MPI_SUBVERSION", "MPICH_VERSION", "I_MPI_VERSION",
                                         "MVAPICH2_VERSION", "MVAPICH_VERSION", "OMPI_MAJOR_VERSION",
                                         "OMPI_MINOR_VERSION", "OMPI_RELEASE_VERSION", "MPI_ABI_VERSION") if k in m}}


RECORD_HEAD = '''"""Generated by setup.py at build time (not in git): the MPI library lpmpi._core was built
against.  import lpmpi compares it with the MPI mpi4py loaded before importing the engine
(lpmpi/_abi.py)."""
'''


# ---------------------------------------------------------------- CUDA
def find_cuda():
    """(nvcc, cuda_home) or None; honours LPMPI_CUDA=0/1."""
    want = os.environ.get("LPMPI_CUDA", "").strip().lower()
    if want in ("0", "no", "off", "false"):
        print("lpmpi: CUDA disabled (LPMPI_CUDA=0)")
        return None
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = os.environ.get("NVCC") or next(
        (str(Path(h) / "bin" / "nvcc") for h in homes if h and (Path(h) / "bin" / "nvcc").exists()),
        None) or shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                           if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if nvcc:
        homes += [str(Path(os.path.realpath(nvcc)).parent.parent), "/usr/local/cuda"]
    for h in homes:
        if not h or not nvcc:
            continue
        lib = next((d for d in (Path(h) / "lib64", Path(h) / "targets" / "x86_64-linux" / "lib",
                                Path(h) / "lib") if (d / "libcudart_static.a").exists()), None)
        if (Path(h) / "include" / "cuda_runtime.h").exists() and lib:
            print(f"lpmpi: CUDA from {nvcc} (headers {h}/include, runtime {lib})")
            return nvcc, h, str(lib)
    msg = "lpmpi: nvcc or the CUDA headers/static runtime not found: building without CUDA"
    if want in ("1", "yes", "on", "true"):
        sys.exit(msg.replace("building without CUDA", "LPMPI_CUDA=1 asks for CUDA"))
    print(msg)
    return None


def gencode_flags():
    archs = [a.strip() for a in os.environ.get("LPMPI_CUDA_ARCHS", "80;90").replace(",", ";").split(";")
             if a.strip()]
    flags = []
    for a in archs:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    flags += ["-gencode", f"arch=compute_{archs[-1]},code=compute_{archs[-1]}"]   # PTX: newer GPUs
    return flags


class BuildExt(build_ext):
    """build_ext that first compiles the .cu files with nvcc when CUDA is configured, and
    rebuilds everything when the MPI library changed since the last build in this build
    directory (setuptools compares only timestamps: a checkout built once for MPICH and then
    installed with MPICC=<Open MPI's mpicc> would link MPICH's objects against the wrong libmpi)."""

    def run(self):
        key = repr([(e.include_dirs, e.library_dirs, e.libraries, sys.executable) for e in self.extensions])
        stamp = Path(self.build_temp) / "lpmpi-mpi-stamp.txt"
        if not stamp.exists() or stamp.read_text() != key:
            self.force = True
        super().run()
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(key)
        self.write_mpi_record()

    def _record_paths(self):
        paths = [Path(self.build_lib) / "lpmpi" / "_build_mpi.py"]
        if self.inplace:    # build_ext --inplace, editable installs: the source tree's package too
            paths.append(Path(self.get_finalized_command("build_py").get_package_dir("lpmpi")) / "_build_mpi.py")
        return paths

    def write_mpi_record(self):
        """lpmpi/_build_mpi.py beside the engine, from the MPI just built against (the engine's own
        DT_NEEDED names the libmpi it links)."""
        import pprint

        ext = next(e for e in self.extensions if e.name == "lpmpi._core")
        built = Path(self.build_lib) / self.get_ext_filename(self.get_ext_fullname(ext.name))
        rec = mpi_record(ext._lpmpi_mpicc, ext.library_dirs, _abi_module().libmpi_needed(str(built)))
        print(f"lpmpi: built against {rec['library']} ({rec['abi']}, {rec['soname']}, {rec['mpicc']})")
        text = RECORD_HEAD + "RECORD = " + pprint.pformat(rec, width=100, sort_dicts=False) + "\n"
        for p in self._record_paths():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)

    def get_outputs(self):
        outs = super().get_outputs()
        return outs if self.inplace else outs + [str(Path(self.build_lib) / "lpmpi" / "_build_mpi.py")]

    def build_extension(self, ext):
        cuda = getattr(ext, "_lpmpi_cuda", None)
        if cuda:
            nvcc, home, lib = cuda
            out = Path(self.build_temp) / "cuda"
            out.mkdir(parents=True, exist_ok=True)
            objs = []
            for cu in ext._lpmpi_cu:
                obj = out / (Path(cu).stem + ".o")
                cmd = [nvcc, "-c", cu, "-o", str(obj), "-O3", "--fmad=false", "-std=c++17",
                       "-Xcompiler", "-fPIC", "-DLPMPI_HAVE_CUDA", "-Isrc/include", f"-I{home}/include"]
                cmd += [f"-I{d}" for d in ext._lpmpi_mpi_inc] + gencode_flags()
                print("lpmpi: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
                r = subprocess.run(cmd, check=False)
                if r.returncode != 0:
                    sys.exit(f"lpmpi: nvcc failed on {cu} (exit {r.returncode}); LPMPI_CUDA=0 builds "
                             "without CUDA")
                objs.append(str(obj))
            ext.extra_objects = objs + [str(Path(lib) / "libcudart_static.a")]
            ext.extra_link_args = list(ext.extra_link_args) + ["-ldl", "-lrt", "-lpthread", "-lstdc++"]
        super().build_extension(ext)


def extensions():
    import mpi4py
    import numpy
    from Cython.Build import cythonize

    mpicc = find_mpicc()
    inc, libdirs, libs = mpi_flags(mpicc)
    print(f"lpmpi: MPI from {mpicc}: include {inc}, libs {libs}")
    sources = ["lpmpi/_core.pyx"] + sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*/*.c"))
    # the .pxi files _core.pyx includes (one concern a file): a change to one rebuilds the module
    # (cythonize follows the includes too), and setuptools' sdist takes depends with the sources
    pxi = sorted(str(p.relative_to(HERE)) for p in (HERE / "lpmpi" / "_core.src").glob("*.pxi"))
    cuda = find_cuda()
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    if cuda:
        macros.append(("LPMPI_HAVE_CUDA", "1"))
    ext = Extension(
        "lpmpi._core",
        sources=sources,
        include_dirs=["src/include", numpy.get_include(), mpi4py.get_include()] + inc,
        library_dirs=libdirs,
        libraries=libs,
        define_macros=macros,
        depends=pxi,
        extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wno-unused-function",
                            "-Werror=implicit-function-declaration"],
        # the mpich wheel's libmpi lives in <env>/lib; the extension in <env>/lib/pythonX/site-packages/lpmpi
        extra_link_args=["-Wl,-rpath,$ORIGIN/../../.."],
    )
    exts = cythonize([ext], language_level=3, include_path=[mpi4py.get_include()])
    for e in exts:
        e._lpmpi_cuda = cuda
        e._lpmpi_cu = sorted(str(p.relative_to(HERE)) for p in (HERE / "src" / "device" / "cuda").glob("*.cu"))
        e._lpmpi_mpi_inc = inc
        e._lpmpi_mpicc = mpicc
    return exts


def install_requires():
    reqs = ["numpy>=1.23,<3", "mpi4py>=4.0,<5"]
    if not os.environ.get("MPICC"):  # default MPI: MPICH from PyPI
        reqs.append("mpich>=4.2,<6")
    return reqs


setup(ext_modules=extensions(), install_requires=install_requires(), cmdclass={"build_ext": BuildExt})
