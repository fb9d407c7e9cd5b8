"""lpmpi's environment variables, read in one place, once, at import (as NCCL reads NCCL_*).

Every variable lpmpi reads is in :data:`VARIABLES` (the README's and docs/api.md's tables come
from the same list); :func:`read` parses them all, warning once about each value it cannot use
(and then ignoring it), and :func:`apply` hands them to the engine.  Nothing else in lpmpi reads
``os.environ`` for an ``LPMPI_*`` name.

>>> s = read({"LPMPI_CHUNK_BYTES": "256KiB", "LPMPI_ALGORITHM": "LP"})
>>> s.chunk_bytes, s.algorithm
(262144, 'lp')
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from lpmpi import engine
from lpmpi._knobs import BY_NAME, KNOBS, NODE_TRANSPORTS, Knob  # noqa: F401 (Knob, NODE_TRANSPORTS: re-exported)
from lpmpi._units import parse_size

_W, _S = BY_NAME["LPMPI_WINDOW"].hi, BY_NAME["LPMPI_STAGING_BUFFERS"].hi
assert (_W, _S) == (engine.WINDOW_MAX, engine.STAGING_MAX), "lpmpi/_knobs.py and the engine's limits differ"

#: (name, value, what it does): every variable lpmpi reads (the knob table's, lpmpi/_knobs.py)
VARIABLES: tuple[tuple[str, str, str], ...] = tuple((k.name, k.value, k.doc) for k in KNOBS)

_FALSE = ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class Settings:
    """The parsed environment (None / 0: not set, the engine's default)."""

    algorithm: str | None = None       # lower case; None for unset or "auto"
    chunk_bytes: int | None = None
    tuning_file: str | None = None     # as given ("none" disables tables)
    tables_as: str | None = None       # LPMPI_TABLES_AS: a shipped table whose machine to load as
    window: int = 0
    check: bool = False
    debug: bool = False
    staging_buffers: int = 0
    cuda_aware: int = -1               # -1 ask the MPI library, 0 staged, 1 aware
    emulate_staging: bool = False
    max_msg_bytes: int = 0
    progress_thread: bool = False
    node_transport: str = "auto"       # LPMPI_NODE_TRANSPORT: auto, shm, cma or mpi
    shm_spin_us: int | None = None     # LPMPI_SHM_SPIN_US: None = the engine's default
    timeout: float = 0.0               # LPMPI_TIMEOUT: seconds, 0 = off
    autotune: bool = False             # LPMPI_AUTOTUNE
    autotune_file: str | None = None   # LPMPI_AUTOTUNE_FILE (None: the per-machine cache; "none": no file)
    trace: str | None = None           # LPMPI_TRACE: directory
    trace_max: int = 0                 # LPMPI_TRACE_MAX (0: the engine's default)
    fr_size: int = 256                 # LPMPI_FR_SIZE
    fr_dir: str | None = None          # LPMPI_FR_DIR
    abort_timeout: float = 1800.0      # LPMPI_ABORT_TIMEOUT: seconds, 0 = never
    tuner_fake_device: bool = False    # LPMPI_TUNER_FAKE_DEVICE (tests; read again at each use: flag_now)


def _caller_level() -> int:
    """The stacklevel of the first frame outside lpmpi and the import machinery, as seen from
    the warnings.warn call in _ignore: a warning points at the user's ``import lpmpi`` (or
    their call), not at this file."""
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    f, level = sys._getframe(2), 2          # the caller of _ignore: warn's level 2
    while f is not None:
        name = f.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name    # warn() does not count these
        if not (name.startswith(here) or internal):
            return level
        f, level = f.f_back, level + (not internal)
    return 2


#: the variables whose values the last :func:`read` ignored (lpmpi-info says so)
_ignored: set[str] = set()


def _ignore(name: str, value: str, why: str) -> None:
    _ignored.add(name)
    warnings.warn(f"lpmpi: ignoring {name}={value!r} ({why})", stacklevel=_caller_level())


def _flag(env: Mapping[str, str], name: str) -> bool:
    """A 0|1 switch: "" and 0 off, 1 on (true/false, yes/no, on/off too, any case); anything
    else warns and leaves it off (the default of every switch)."""
    v = env.get(name, "").strip().lower()
    if v in _FALSE:
        return False
    if v in ("1", "true", "yes", "on"):
        return True
    _ignore(name, env[name], "not 0 or 1")
    return False


def _size(env: Mapping[str, str], name: str) -> int:
    v = env.get(name, "").strip()
    if not v:
        return 0
    try:
        n = int(v, 0) if v.lower().startswith("0x") else parse_size(v)
    except ValueError:
        n = 0
    if n <= 0:
        _ignore(name, v, "not a positive size such as 4096, 64K or 1MiB")
        return 0
    return n


def _ranged(env: Mapping[str, str], name: str, lo: int, hi: int) -> int:
    v = env.get(name, "").strip()
    if not v:
        return 0
    try:
        n = int(v, 0)
    except ValueError:
        n = lo - 1
    if not lo <= n <= hi:
        _ignore(name, v, f"not an integer in {lo}..{hi}")
        return 0
    return n


def read(env: Mapping[str, str] | None = None, algorithms: tuple[str, ...] = ()) -> Settings:
    """Parse ``env`` (default ``os.environ``); ``algorithms``: the names LPMPI_ALGORITHM may
    take (empty: any).  Bad values warn and are ignored."""
    env = os.environ if env is None else env
    _ignored.clear()
    alg = env.get("LPMPI_ALGORITHM", "").strip().lower() or None
    if alg == "auto":
        alg = None
    if alg is not None and algorithms and alg not in algorithms:
        _ignore("LPMPI_ALGORITHM", env["LPMPI_ALGORITHM"], f"unknown algorithm; one of {', '.join(algorithms)}")
        alg = None
    aware = env.get("LPMPI_CUDA_AWARE", "").strip()
    nt = env.get("LPMPI_NODE_TRANSPORT", "").strip().lower()
    if nt not in ("", *NODE_TRANSPORTS):
        _ignore("LPMPI_NODE_TRANSPORT", env["LPMPI_NODE_TRANSPORT"], f"not one of {', '.join(NODE_TRANSPORTS)}")
        nt = ""
    return Settings(
        algorithm=alg,
        chunk_bytes=_chunk(env),
        tuning_file=env.get("LPMPI_TUNING_FILE", "").strip() or None,
        tables_as=env.get("LPMPI_TABLES_AS", "").strip() or None,
        window=_ranged(env, "LPMPI_WINDOW", 1, _W),
        check=_flag(env, "LPMPI_CHECK"),
        debug=_flag(env, "LPMPI_DEBUG"),
        staging_buffers=_ranged(env, "LPMPI_STAGING_BUFFERS", 1, _S),
        cuda_aware=-1 if not aware else int(_flag(env, "LPMPI_CUDA_AWARE")),
        emulate_staging=_flag(env, "LPMPI_EMULATE_STAGING"),
        max_msg_bytes=_size(env, "LPMPI_MAX_MSG_BYTES"),
        progress_thread=_flag(env, "LPMPI_PROGRESS_THREAD"),
        node_transport=nt or "auto",
        shm_spin_us=_spin(env),
        timeout=_seconds(env, "LPMPI_TIMEOUT"),
        autotune=_flag(env, "LPMPI_AUTOTUNE"),
        autotune_file=env.get("LPMPI_AUTOTUNE_FILE", "").strip() or None,
        trace=env.get("LPMPI_TRACE", "").strip() or None,
        trace_max=_ranged(env, "LPMPI_TRACE_MAX", 1, int(BY_NAME["LPMPI_TRACE_MAX"].hi)),
        fr_size=_fr_size(env),
        fr_dir=env.get("LPMPI_FR_DIR", "").strip() or None,
        abort_timeout=_seconds(env, "LPMPI_ABORT_TIMEOUT", BY_NAME["LPMPI_ABORT_TIMEOUT"].default, zero=True),
        tuner_fake_device=_flag(env, "LPMPI_TUNER_FAKE_DEVICE"),
    )


def flag_now(name: str) -> bool:
    """A 0|1 knob of the table as the environment has it now (for the knobs read at each use, not
    once at import: LPMPI_TUNER_FAKE_DEVICE); a bad value warns and reads as off."""
    assert BY_NAME[name].kind == "flag", name
    return _flag(os.environ, name)


def _chunk(env: Mapping[str, str]) -> int | None:
    n = _size(env, "LPMPI_CHUNK_BYTES")
    if n and n < engine.CHUNK_MIN:
        _ignore("LPMPI_CHUNK_BYTES", env["LPMPI_CHUNK_BYTES"], f"below the smallest chunk, {engine.CHUNK_MIN} bytes")
        return None
    return n or None


def _fr_size(env: Mapping[str, str]) -> int:
    v = env.get("LPMPI_FR_SIZE", "").strip()
    if v == "0":
        return 0
    k = BY_NAME["LPMPI_FR_SIZE"]
    return _ranged(env, k.name, 1, int(k.hi)) or int(k.default)


def _seconds(env: Mapping[str, str], name: str, default: float = 0.0, zero: bool = False) -> float:
    """Seconds in (0, 1e6] (zero: 0 too, meaning never); unset or bad: default."""
    v = env.get(name, "").strip()
    if not v:
        return default
    try:
        t = float(v)
    except ValueError:
        t = -1.0
    if zero and t == 0:
        return 0.0
    if not 0 < t <= 1e6:          # NaN fails the comparison too
        _ignore(name, v, "not a number of seconds in " + ("[0, 1e6] (0: never)" if zero else "(0, 1e6]"))
        return default
    return t


def _spin(env: Mapping[str, str]) -> int | None:
    v = env.get("LPMPI_SHM_SPIN_US", "").strip()
    if not v:
        return None
    try:
        n = int(v)
    except ValueError:
        n = -2
    k = BY_NAME["LPMPI_SHM_SPIN_US"]
    if not k.lo <= n <= k.hi:
        _ignore(k.name, v, f"not an integer in {k.lo}..{k.hi}")
        return None
    return n


#: what :func:`apply` read at import
settings = Settings()


def apply() -> Settings:
    """Read the environment and configure the engine with it (once, at import of lpmpi)."""
    global settings
    from lpmpi import _core

    names = tuple(sorted({a for c in _core.COLLECTIVES for a in _core.algorithms(c)}))
    settings = s = read(algorithms=names)
    _core._configure(s.max_msg_bytes, s.window, s.check, s.debug)
    _core._configure_device(s.emulate_staging, s.cuda_aware, s.staging_buffers)
    _core._configure_node_transport(NODE_TRANSPORTS.index(s.node_transport))
    if s.shm_spin_us is not None:
        _core._configure_shm_spin(s.shm_spin_us)
    _core._configure_timeout(s.timeout)
    _core._configure_flight(s.fr_size, os.path.abspath(s.fr_dir) if s.fr_dir else "", s.abort_timeout)
    if s.trace:
        from lpmpi import trace

        trace.start(s.trace, s.trace_max)
    _core.set_autotune(s.autotune)
    for coll in _core.COLLECTIVES:
        # an algorithm that a collective lacks (ring for bcast) leaves that collective on auto
        _core.set_override(coll, s.algorithm if s.algorithm in _core.algorithms(coll) else None,
                           s.chunk_bytes)
    if s.progress_thread:
        try:
            _core.progress_thread(True)
        except Exception as exc:  # noqa: BLE001 - a warning, never a failed import
            warnings.warn(f"lpmpi: LPMPI_PROGRESS_THREAD=1 ignored: {exc}", RuntimeWarning, stacklevel=3)
    return s


def in_force(s: Settings | None = None, env: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(name, value in force, where it came from) of every knob: "environment" (set, and used),
    "default" (unset), or "default: <value> ignored" (set to a value lpmpi could not use: it
    warned at import).  ``s``: the parsed settings (default: what import read)."""
    s = settings if s is None else s
    env = os.environ if env is None else env
    out = []
    for k in KNOBS:
        v = getattr(s, k.field)
        unset = v is None or (v == 0 and k.kind in ("int", "size") and k.lo != 0) or (k.kind == "flag" and v == -1)
        shown = k.default if unset and k.default is not None else v
        if isinstance(shown, bool):
            shown = int(shown)
        given = env.get(k.name, "").strip()
        if k.name in _ignored and given:
            src = f"default: {given!r} ignored"
        elif given:
            src = "environment"
        else:
            src = "default"
        if k.c_text == "tristate" and shown == -1:
            shown = None
        out.append((k.name, "unset" if shown is None else str(shown), src))
    return out


def table_text() -> str:
    """The variables as a Markdown table (README.md, docs/api.md)."""
    lines = ["| variable | value | effect |", "|---|---|---|"]
    lines += [f"| `{n}` | {v.replace('|', chr(92) + '|')} | {w} |" for n, v, w in VARIABLES]
    return "\n".join(lines)
