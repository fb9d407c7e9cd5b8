"""Rank 0's progress line and the closing summary table."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from lpmpi.bench import format_bytes
from tuner.space import Config


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

    @property
    def speedup(self) -> float | None:
        return self.native_s / self.seconds if self.native_s and self.seconds else None


class Progress:
    """One status line on rank 0: bucket, trial i/N, best so far.  On a terminal it is redrawn
    in place; otherwise one line per finished bucket."""

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
        elif final:
            self.stream.write(text + "\n")
        self.stream.flush()

    def trial(self, head: str, done: int, budget: int, cfg: Config, seconds: float, pruned: bool,
              best: tuple[Config, float] | None) -> None:
        """After each trial."""
        what = f"{cfg.label} {seconds * 1e6:.1f} us" + (" (pruned)" if pruned else "")
        best_text = f"best {best[0].label} {best[1] * 1e6:.1f} us" if best else "best -"
        self._draw(f"{head} trial {done}/{budget}: {what} | {best_text}", final=False)

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
    when any choice has them, the staging buffers)."""
    staged = any(r.choice.staging_buffers is not None for r in results)
    head = f"{'collective':<10} {'size':>10} {'algorithm':<9} {'chunk':>9} " \
           + (f"{'staging':>7} " if staged else "") \
           + f"{'time_us':>11} {'native_us':>11} {'speedup':>8} {'trials/grid':>12}"
    lines = [head, "-" * len(head)]
    for r in results:
        chunk = format_bytes(r.choice.chunk_bytes) if r.choice.chunk_bytes else "-"
        staging = f"{r.choice.staging_buffers or '-':>7} " if staged else ""
        up = f"{r.speedup:.2f}x" if r.speedup else "-"
        lines.append(f"{r.collective:<10} {format_bytes(r.nbytes):>10} {r.choice.algorithm:<9} "
                     f"{chunk:>9} {staging}{_us(r.seconds):>11} {_us(r.native_s):>11} {up:>8} "
                     f"{f'1+{r.measured}/{r.grid}':>12}")
    return lines
