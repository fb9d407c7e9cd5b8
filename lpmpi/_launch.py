"""How this process was started, for the command-line tools (``lpmpi-bench``, ``lpmpi-tune``,
``lpmpi-info``): one of several processes of one MPI job, or alone.

A tool started without ``mpiexec`` runs as one process (MPI's singleton, P = 1) and measures
nothing worth having (the tuner would write a P = 1 table).  A tool started by another MPI's
launcher (Open MPI's ``mpiexec`` for an mpi4py built against MPICH, ``srun`` with a PMI plugin
the library lacks) is worse: each of its N processes is a singleton of its own, or MPI_Init
aborts with the library's PMI error.  The launchers leave traces in the environment (Open MPI:
``OMPI_COMM_WORLD_SIZE``; PMIx launchers: ``PMIX_RANK``; MPICH's and Intel MPI's hydra:
``PMI_SIZE``; Slurm's srun: ``SLURM_PROCID`` and ``SLURM_STEP_NUM_TASKS``), so a singleton
whose environment says N > 1 processes were started was started by a launcher that does not
match the MPI library mpi4py uses, and the tools say so, naming that library.

Importing this module imports neither MPI nor the rest of lpmpi: :func:`preinit_problem` is
meant to run before ``MPI_Init``, where a PMIx launcher's environment makes MPICH abort.  Nothing
calls it yet: ``import lpmpi`` initializes MPI first (lpmpi/__init__.py would have to ask it
before ``from mpi4py import MPI``), so under a PMIx launcher the tools still end in MPICH's own
error there.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ALLOW_SINGLE = "--allow-single"
EXIT_USAGE = 2


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def launcher_traces(env: Mapping[str, str] | None = None) -> list[tuple[str, str, int | None]]:
    """``(variable=value, launcher, processes it started or None)`` for every launcher's trace
    in ``env`` (default: this process's environment).

    >>> launcher_traces({"OMPI_COMM_WORLD_SIZE": "4", "PATH": "/bin"})
    [('OMPI_COMM_WORLD_SIZE=4', "Open MPI's mpiexec", 4)]
    >>> launcher_traces({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "8"})
    [('SLURM_STEP_NUM_TASKS=2', "Slurm's srun", 2)]
    """
    env = os.environ if env is None else env
    out: list[tuple[str, str, int | None]] = []
    n = _int(env.get("OMPI_COMM_WORLD_SIZE"))
    if n is not None:
        out.append((f"OMPI_COMM_WORLD_SIZE={n}", "Open MPI's mpiexec", n))
    pmix = next((v for v in ("PMIX_RANK", "PMIX_NAMESPACE") if v in env), None)
    if pmix is not None:
        out.append((f"{pmix}={env[pmix]}", "a PMIx launcher (Open MPI's mpiexec, prterun, srun --mpi=pmix)",
                    None))
    n = _int(env.get("PMI_SIZE"))
    if n is not None:
        intel = any(k.startswith("I_MPI_") and k != "I_MPI_ROOT" for k in env)
        out.append((f"PMI_SIZE={n}", "Intel MPI's mpiexec" if intel else "a PMI launcher (MPICH's or "
                    "Intel MPI's mpiexec)", n))
    if "SLURM_PROCID" in env:
        var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
        n = _int(env.get(var))
        out.append((f"{var}={env.get(var)}", "Slurm's srun", n))
    return out


def library_line(text: str) -> str:
    """The first line of ``MPI.Get_library_version()``, whitespace collapsed.

    >>> library_line("MPICH Version:      5.0.2\\nMPICH Release date: ...")
    'MPICH Version: 5.0.2'
    """
    lines = text.replace("\x00", "").strip().splitlines()
    return " ".join(lines[0].split()) if lines else "an unknown MPI library"


def _library() -> str:
    from mpi4py import MPI

    return MPI.Get_library_version()


def mpiexec_hint(prog: str, nprocs: int = 2) -> str:
    """The command that starts ``prog`` on ``nprocs`` processes with the mpiexec installed next
    to this Python (a virtual environment's, which belongs to its mpi4py's MPI) where there is
    one, else the ``mpiexec`` on PATH."""
    here = Path(sys.executable).parent
    mpiexec = here / "mpiexec"
    if not mpiexec.exists():
        return f"mpiexec -n {nprocs} {prog}"
    tool = here / prog
    return f"{mpiexec} -n {nprocs} {tool if tool.exists() else prog}"


def mismatch(nprocs: int, env: Mapping[str, str] | None = None, library: str | None = None,
             prog: str = "python") -> str | None:
    """Why this process's launcher does not match its MPI library, or None: MPI sees ``nprocs``
    process(es), fewer than a launcher's trace in ``env`` says it started (``library``: the
    MPI library's version text, default ``MPI.Get_library_version()``; ``prog``: the command
    the advice starts)."""
    for what, launcher, n in launcher_traces(env):
        if n is not None and n > nprocs:
            lib = library_line(library or _library())
            return (f"the environment says {launcher} started {n} processes ({what}), but MPI sees "
                    f"{'this one alone' if nprocs == 1 else f'{nprocs}'}: that launcher does not match the "
                    f"MPI library mpi4py uses, {lib}. Start the job with that library's own mpiexec "
                    f"(e.g. `{mpiexec_hint(prog, n)} ...`), or build mpi4py and lpmpi against the "
                    "launcher's MPI (README: MPICC=/path/to/mpicc pip install .)")
    return None


def single_process_problem(prog: str, nprocs: int, env: Mapping[str, str] | None = None,
                           library: str | None = None) -> str | None:
    """Why ``prog`` should not run in a world of ``nprocs`` processes (one line), or None when
    it has more than one."""
    if nprocs > 1:
        return None
    why = mismatch(nprocs, env, library, prog)
    if why:
        return f"{prog}: {why}"
    return (f"{prog}: this is one process (P = 1): start it under mpiexec, e.g. "
            f"`{mpiexec_hint(prog)}` (`mpiexec -n 2 {prog}` in an activated virtual environment), "
            f"or pass {ALLOW_SINGLE} to run it as one process anyway")


def refuse_single(prog: str, nprocs: int, allow: bool, env: Mapping[str, str] | None = None,
                  library: str | None = None) -> int | None:
    """For ``lpmpi-bench`` and ``lpmpi-tune``: in a world of one process, say why on stderr and
    return the exit status 2, unless ``allow`` (``--allow-single``) and no launcher mismatch
    (N processes that each run alone are never what was wanted); None: go on."""
    if nprocs > 1:
        return None
    if mismatch(nprocs, env, library, prog) is None and allow:
        return None
    print(single_process_problem(prog, nprocs, env, library), file=sys.stderr, flush=True)
    return EXIT_USAGE


def add_allow_single(parser) -> None:
    """The ``--allow-single`` option of a tool that refuses to run as one process."""
    parser.add_argument(ALLOW_SINGLE, action="store_true",
                        help="run even as one process (P = 1, started without mpiexec); without it "
                        "the command refuses, since one process compares nothing")


def info_lines(nprocs: int, env: Mapping[str, str] | None = None, library: str | None = None) -> list[str]:
    """What ``lpmpi-info`` says about the launch: nothing for P > 1."""
    if nprocs > 1:
        return []
    why = mismatch(nprocs, env, library, "lpmpi-info")
    if why:
        return [f"launch: {why}"]
    return [("launch: one process (P = 1, not started by mpiexec): what auto picks below is for P = 1; "
             f"for P ranks start it under mpiexec, e.g. `{mpiexec_hint('lpmpi-info')}`")]


def preinit_problem(env: Mapping[str, str] | None = None, library: str | None = None) -> str | None:
    """Before ``MPI_Init``: where a PMIx launcher started this process (``PMIX_RANK`` or
    ``PMIX_NAMESPACE`` set) and the MPI library mpi4py uses is an MPICH built without PMIx,
    ``MPI_Init`` would abort with "Runtime environment uses unsupported PMI version PMIx"; this
    says why instead (None: no such problem).  The library's version is read without
    initializing MPI: from ``mpi4py.MPI`` where it is imported already, else from a short
    child process (only in that PMIx case)."""
    env = os.environ if env is None else env
    pmix = next((v for v in ("PMIX_RANK", "PMIX_NAMESPACE") if v in env), None)
    if pmix is None:
        return None
    if library is None:
        if "mpi4py.MPI" in sys.modules:
            library = sys.modules["mpi4py.MPI"].Get_library_version()
        else:
            code = ("import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
                    "print(MPI.Get_library_version())")
            try:
                p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                   check=False, env={k: v for k, v in env.items() if not k.startswith("PMIX_")})
            except (OSError, subprocess.SubprocessError):
                return None
            if p.returncode != 0:
                return None
            library = p.stdout
    if not library.lstrip().startswith("MPICH") or "pmix" in library.lower():
        return None
    return (f"a PMIx launcher (Open MPI's mpiexec, prterun, srun --mpi=pmix) started this process "
            f"({pmix}={env[pmix]}), but the MPI library mpi4py uses, {library_line(library)}, has no "
            f"PMIx support (its MPI_Init would abort): start the job with its own mpiexec (e.g. "
            f"`{mpiexec_hint('python')} ...`), or build mpi4py and lpmpi against the launcher's MPI")
