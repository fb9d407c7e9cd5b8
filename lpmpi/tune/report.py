"""What rank 0 prints: the progress (one line per trial with an ETA, one per bucket) and the
closing summary table.

>>> describe(Config("lp", 16384, 8)), duration(80), seconds_text(2.1e-4)
('lp chunk 16 KiB staging 8', '1m20s', '0.21 ms')
>>> describe(Config("ring", 1 << 18, transport="shm"))
'ring chunk 256 KiB over shm'
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from lpmpi.bench import format_bytes
from lpmpi.tune.space import Config


@dataclass(frozen=True)
class BucketResult:
    """The outcome of one bucket: the chosen configuration and its (verified) times in seconds."""

    collective: str
    nbytes: int
    choice: Config
    seconds: float
    native_s: float | None
    measured: int            # distinct configurations measured besides the native baseline
    budget: int
    grid: int                # the exhaustive grid's size
    pruned: int = 0
    reused: bool = False     # taken from an earlier run's stored choice
    one_core_s: float | None = None   # --shared-core: the choice with every rank on one core

    @property
    def speedup(self) -> float | None:
        return self.native_s / self.seconds if self.native_s and self.seconds else None


def describe(cfg: Config) -> str:
    """A configuration in words: ``lp chunk 16 KiB``, ``lp chunk 1 MiB staging 8``,
    ``ring chunk 256 KiB over shm``, ``native``."""
    text = cfg.algorithm
    if cfg.chunk_bytes is not None:
        text += f" chunk {format_bytes(cfg.chunk_bytes)}"
    if cfg.staging_buffers is not None:
        text += f" staging {cfg.staging_buffers}"
    if cfg.transport is not None:
        text += f" over {cfg.transport}"
    return text


def seconds_text(seconds: float) -> str:
    """A measured time: ``12.3 us``, ``0.21 ms`` (from 100 us), ``1.50 s``."""
    if seconds < 1e-4:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def duration(seconds: float) -> str:
    """A time left: ``45s``, ``1m20s``, ``2h05m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Rank 0's progress: after each trial a line with the bucket, trial i/N, the configuration,
    its time, the best so far and the ETA of the run's trials (at this run's rate so far); after
    each bucket its choice.  On a terminal the trial line is redrawn in place; otherwise (under
    mpiexec, a pipe or a file) every trial line is printed."""

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._width = 0

    def _draw(self, text: str, final: bool) -> None:
        if not self.enabled:
            return
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad + ("\n" if final else ""))
            self._width = 0 if final else len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def trial(self, collective: str, nbytes: int, done: int, budget: int, cfg: Config, seconds: float,
              pruned: bool, best: tuple[Config, float] | None, eta_s: float | None = None) -> None:
        """After each trial (``done`` of ``budget`` counted; native, the baseline, is not)."""
        what = f"{describe(cfg)} {seconds_text(seconds)}" + (" (pruned)" if pruned else "")
        best_text = f"best {best[0].label} {seconds_text(best[1])}" if best else "best -"
        eta = duration(eta_s) if eta_s is not None else "-"
        self._draw(f"{collective} {format_bytes(nbytes)} trial {done}/{budget} {what}  {best_text}  ETA {eta}",
                   final=False)

    def bucket(self, head: str, r: BucketResult) -> None:
        """After each bucket."""
        how = "from the earlier run" if r.reused else f"native + {r.measured} of the {r.grid} grid points"
        up = f", {r.speedup:.2f}x native" if r.speedup else ""
        self._draw(f"{head} -> {r.choice.label} {r.seconds * 1e6:.1f} us{up} ({how})", final=True)

    def note(self, text: str) -> None:
        if self.enabled:
            self._draw(text, final=True)


def _us(seconds: float | None) -> str:
    return f"{seconds * 1e6:.1f}" if seconds else "-"


def summary(results: Sequence[BucketResult]) -> list[str]:
    """The closing table: per bucket the choice, its time, native's time and the speed-up (and,
    when any choice has them, the staging buffers and the transport)."""
    staged = any(r.choice.staging_buffers is not None for r in results)
    transported = any(r.choice.transport is not None for r in results)
    head = f"{'collective':<10} {'size':>10} {'algorithm':<9} {'chunk':>9} " \
           + (f"{'staging':>7} " if staged else "") + (f"{'transport':>9} " if transported else "") \
           + f"{'time_us':>11} {'native_us':>11} {'speedup':>8} {'trials/grid':>12}"
    lines = [head, "-" * len(head)]
    for r in results:
        chunk = format_bytes(r.choice.chunk_bytes) if r.choice.chunk_bytes else "-"
        staging = f"{r.choice.staging_buffers or '-':>7} " if staged else ""
        transport = f"{r.choice.transport or '-':>9} " if transported else ""
        up = f"{r.speedup:.2f}x" if r.speedup else "-"
        lines.append(f"{r.collective:<10} {format_bytes(r.nbytes):>10} {r.choice.algorithm:<9} "
                     f"{chunk:>9} {staging}{transport}{_us(r.seconds):>11} {_us(r.native_s):>11} {up:>8} "
                     f"{f'1+{r.measured}/{r.grid}':>12}")
    return lines
