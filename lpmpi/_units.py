"""Byte sizes as people write them, in one place: the grammar of ``--sizes`` (bench, tuner) and
of ``LPMPI_CHUNK_BYTES``, and the labels every table prints (``64 MiB``, ``lp/64K``).

Binary units throughout: ``1K`` = ``1KiB`` = 1024 bytes.  Public through :mod:`lpmpi.bench`."""
from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Parse a byte count such as ``8``, ``1K``, ``64KiB``, ``1.5M`` or ``64MiB`` (binary units).

    >>> parse_size("64MiB") == 64 << 20
    True
    >>> parse_size("256KiB")
    262144
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kmgtKMGT]?)(?:i?[bB])?\s*", text)
    if not m:
        raise ValueError(f"bad size {text!r} (examples: 8, 1K, 64KiB, 1M, 64MiB)")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value != int(value):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def _size_range(lo: int, hi: int, step: str) -> list[int]:
    """Sizes ``lo, lo*F, ... <= hi`` for step ``xF`` or ``lo, lo+S, ...`` for ``+S``; hi included."""
    if lo > hi:
        raise ValueError(f"size range {lo}:{hi} is empty")
    out: list[int] = []
    if step[:1] in ("x", "*"):
        factor = float(step[1:])
        if factor <= 1 or lo < 1:
            raise ValueError(f"size range step {step!r} needs a factor > 1 and a start >= 1")
        size = float(lo)
        while size <= hi:
            out.append(int(size))
            size *= factor
    elif step[:1] == "+":
        inc = parse_size(step[1:])
        if inc < 1:
            raise ValueError(f"size range step {step!r} must be positive")
        out = list(range(lo, hi + 1, inc))
    else:
        raise ValueError(f"size range step {step!r}: use xF (geometric) or +S (linear)")
    if out[-1] != hi:
        out.append(hi)
    return out


def parse_sizes(spec: str) -> list[int]:
    """Parse a ``--sizes`` value: comma-separated sizes and ``lo:hi[:xF|:+S]`` ranges (default x4).

    >>> parse_sizes("8,1K,16:256:x4")
    [8, 16, 64, 256, 1024]
    """
    sizes: set[int] = set()
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) == 1:
            sizes.add(parse_size(item))
        elif len(parts) in (2, 3):
            step = parts[2].strip() if len(parts) == 3 else "x4"
            sizes.update(_size_range(parse_size(parts[0]), parse_size(parts[1]), step))
        else:
            raise ValueError(f"bad size range {item!r} (use lo:hi or lo:hi:xF or lo:hi:+S)")
    if not sizes:
        raise ValueError("no sizes given")
    return sorted(sizes)


def format_bytes(n: float) -> str:
    """Human-readable binary size: ``8 B``, ``1 KiB``, ``64 MiB``.

    >>> format_bytes(8), format_bytes(1 << 10), format_bytes(64 << 20)
    ('8 B', '1 KiB', '64 MiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:g} TiB"  # pragma: no cover


def chunk_text(chunk_bytes: int) -> str:
    """A chunk size in a configuration label: ``64K``, ``1M``, ``512B``.

    >>> chunk_text(65536), chunk_text(1 << 20), chunk_text(512)
    ('64K', '1M', '512B')
    """
    k = chunk_bytes
    return f"{k >> 20}M" if k >= 1 << 20 else f"{k >> 10}K" if k >= 1 << 10 else f"{k}B"


def chunk_label(algorithm: str, chunk_bytes: int | None, staging_buffers: int | None = None,
                transport: str | None = None) -> str:
    """The label of a configuration: ``lp/64K`` for a chunked one (``lp/64K/s4`` with staging
    buffers), the bare name otherwise; a node-local transport ends it (``ring/256K@shm``).

    >>> chunk_label("lp", 65536), chunk_label("native", None), chunk_label("lp", 1 << 20, 8)
    ('lp/64K', 'native', 'lp/1M/s8')
    >>> chunk_label("ring", 256 << 10, transport="shm"), chunk_label("ring", None, transport="cma")
    ('ring/256K@shm', 'ring@cma')
    """
    at = f"@{transport}" if transport is not None else ""
    if chunk_bytes is None:
        return algorithm + at
    staging = f"/s{staging_buffers}" if staging_buffers is not None else ""
    return f"{algorithm}/{chunk_text(chunk_bytes)}{staging}{at}"
