"""The search space of one bucket (collective, message size, P): configurations, the exhaustive
grid it is compared with, the trial budget and the model's warm-start configurations.

Device memory staged through the host (``--memory cuda`` where MPI is not CUDA-aware) adds one
dimension for chunked algorithms: the staging buffers, chunks in flight per direction of the
staged pipeline (:func:`lpmpi.engine.staging`), a categorical among ``Space.staging``.

Host memory on a communicator with more than one node-local transport
(:func:`lpmpi.bench.node_transports`) adds one dimension for the algorithms that run over one
(:func:`lpmpi.engine.has_transports`: the ring allreduce): the transport
(:func:`lpmpi.engine.transport`), a categorical among ``Space.transports``."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lpmpi import engine, model
from lpmpi.bench import chunk_label

NATIVE = "native"
ALGORITHM_PARAM = "algorithm"
STAGING_CHOICES = (2, 4, 8, 16)   # the staging-buffers dimension's default values
DEFAULT_STAGING = engine.DEFAULT_STAGING   # the engine's default staging buffers


@dataclass(frozen=True, order=True)
class Config:
    """One point of the search space; ``chunk_bytes`` is None for unchunked algorithms,
    ``staging_buffers`` None outside a staging dimension (the process default applies),
    ``transport`` None outside a transport dimension (the model's rule by size applies)."""

    algorithm: str
    chunk_bytes: int | None = None
    staging_buffers: int | None = None
    transport: str | None = None

    @property
    def label(self) -> str:
        """``lp/64K``, ``lp/64K/s8``, ``ring/256K@shm``, ``native`` (:func:`lpmpi.bench.chunk_label`)."""
        return chunk_label(self.algorithm, self.chunk_bytes, self.staging_buffers, self.transport)


def chunk_param(algorithm: str) -> str:
    """The Optuna parameter holding log2 of ``algorithm``'s chunk (one per chunked algorithm,
    so the sampler models each algorithm's chunk separately)."""
    return f"{algorithm}_chunk_log2"


def staging_param(algorithm: str) -> str:
    """The Optuna parameter holding ``algorithm``'s staging buffers (staging spaces only)."""
    return f"{algorithm}_staging_buffers"


def transport_param(algorithm: str) -> str:
    """The Optuna parameter holding ``algorithm``'s node-local transport (transport spaces, the
    algorithms that have transports only)."""
    return f"{algorithm}_transport"


@dataclass(frozen=True)
class Space:
    """The configurations of one collective at one message size; ``staging``: the values of the
    staging-buffers dimension of chunked algorithms (empty: no such dimension, as for host
    memory), ``default_staging`` the process's value (the warm start's); ``transports``: the
    values of the transport dimension of the algorithms in ``transported`` (empty: none),
    ``default_transport`` the one a configuration without a transport is given (None: the
    first of ``transports``)."""

    collective: str
    nbytes: int
    chunked: Mapping[str, bool]    # algorithm -> chunked, in registry order
    staging: tuple[int, ...] = ()
    default_staging: int = DEFAULT_STAGING
    transports: tuple[str, ...] = ()
    transported: frozenset[str] = frozenset()   # the algorithms with a transport dimension
    default_transport: str | None = None

    @classmethod
    def of(cls, collective: str, nbytes: int, staging: tuple[int, ...] = (),
           default_staging: int = DEFAULT_STAGING, transports: tuple[str, ...] = (),
           default_transport: str | None = None) -> Space:
        """The space of ``collective`` at ``nbytes`` from the engine's registry; ``transports``
        (of :data:`lpmpi.engine.TRANSPORTS`, kept in its order) give the algorithms that have
        transports a transport dimension (host memory: the caller passes them only there)."""
        unknown = sorted(set(transports) - set(engine.TRANSPORTS))
        if unknown:
            raise ValueError(f"unknown transports {unknown} (known: {', '.join(engine.TRANSPORTS)})")
        tps = tuple(t for t in engine.TRANSPORTS if t in transports)
        chunked = engine.chunked(collective)
        transported = frozenset(a for a in chunked if tps and engine.has_transports(collective, a))
        return cls(collective, nbytes, chunked, tuple(sorted(set(staging))), default_staging,
                   tps if transported else (), transported,
                   default_transport if transported and default_transport in tps else None)

    @property
    def algorithms(self) -> tuple[str, ...]:
        return tuple(self.chunked)

    @property
    def log2_chunks(self) -> tuple[int, int]:
        """The range of log2(chunk): powers of two from 1 KiB up to the message size, <= 16 MiB."""
        chunks = model.grid_chunks(self.nbytes)
        return chunks[0].bit_length() - 1, chunks[-1].bit_length() - 1

    def grid(self) -> list[Config]:
        """The exhaustive grid (:func:`lpmpi.model.grid`) that the tuner's regret is measured on,
        times the staging choices for chunked algorithms in a staging space and the transports
        for the algorithms that have them in a transport space."""
        out = []
        for alg, chunk in model.grid(self.collective, self.nbytes):
            stagings: tuple[int | None, ...] = self.staging if chunk is not None and self.staging else (None,)
            transports: tuple[str | None, ...] = self.transports if alg in self.transported else (None,)
            out += [Config(alg, chunk, w, tp) for w in stagings for tp in transports]
        return out

    def default_budget(self) -> int:
        """A quarter of the grid's size (rounded up): distinct configurations measured per bucket
        besides the native baseline (measured in every bucket for the table's native time)."""
        return max(1, math.ceil(len(self.grid()) / 4))

    def clamp(self, cfg: Config) -> Config:
        """``cfg`` inside the space: chunk (and staging) dropped for unchunked algorithms; for
        chunked ones the chunk rounded to a power of two in range and, in a staging space, the
        staging buffers to the nearest choice (in log scale; None: the default's); the transport
        kept where the algorithm has the dimension and it is one of its choices (else the
        default transport), dropped elsewhere."""
        transport = None
        if cfg.algorithm in self.transported:
            transport = cfg.transport if cfg.transport in self.transports else \
                self.default_transport or self.transports[0]
        if not self.chunked.get(cfg.algorithm):
            return Config(cfg.algorithm, transport=transport)
        chunk = cfg.chunk_bytes or model.grid_chunks(self.nbytes)[-1]
        staging = None
        if self.staging:
            want = math.log2(cfg.staging_buffers or self.default_staging)
            staging = min(self.staging, key=lambda w: (abs(math.log2(w) - want), w))
        return Config(cfg.algorithm, model.pow2_chunk(chunk, self.nbytes), staging, transport)

    # ---- Optuna parameters
    def params(self, cfg: Config) -> dict[str, Any]:
        """Optuna parameters of a configuration (for ``enqueue_trial``)."""
        cfg = self.clamp(cfg)
        p: dict[str, Any] = {ALGORITHM_PARAM: cfg.algorithm}
        if cfg.chunk_bytes is not None:
            p[chunk_param(cfg.algorithm)] = cfg.chunk_bytes.bit_length() - 1
        if cfg.staging_buffers is not None:
            p[staging_param(cfg.algorithm)] = cfg.staging_buffers
        if cfg.transport is not None:
            p[transport_param(cfg.algorithm)] = cfg.transport
        return p

    def suggest(self, trial: Any) -> Config:
        """Ask an Optuna trial for a configuration (conditional space: a chunk only for chunked
        algorithms, on a log2 scale; in a staging space also their staging buffers, categorical;
        in a transport space the transport of the algorithms that have one, categorical)."""
        alg = trial.suggest_categorical(ALGORITHM_PARAM, list(self.algorithms))
        chunk = staging = transport = None
        if self.chunked[alg]:
            chunk = 1 << trial.suggest_int(chunk_param(alg), *self.log2_chunks)
            if self.staging:
                staging = int(trial.suggest_categorical(staging_param(alg), list(self.staging)))
        if alg in self.transported:
            transport = str(trial.suggest_categorical(transport_param(alg), list(self.transports)))
        return Config(alg, chunk, staging, transport)

    def config_of(self, params: Mapping[str, Any]) -> Config | None:
        """The configuration of a finished trial's parameters (None if not of this space)."""
        alg = params.get(ALGORITHM_PARAM)
        if alg not in self.chunked:
            return None
        transport = None
        if alg in self.transported:
            transport = params.get(transport_param(alg))
            if transport not in self.transports:
                return None
        if not self.chunked[alg]:
            return Config(alg, transport=transport)
        k = params.get(chunk_param(alg))
        if not isinstance(k, int):
            return None
        if not self.staging:
            return Config(alg, 1 << k, transport=transport)
        w = params.get(staging_param(alg))
        return Config(alg, 1 << k, w, transport) if isinstance(w, int) and w in self.staging else None

    # ---- warm start
    def predictions(self, nprocs: int) -> list[tuple[Config, float]]:
        """Every algorithm once at the engine's model-optimal chunk, with the model's time,
        fastest first."""
        out = []
        for alg, chunked in self.chunked.items():
            best = model.best_chunk(self.collective, alg, nprocs, self.nbytes) if chunked else None
            cfg = self.clamp(Config(alg, best))
            out.append((cfg, model.predict(self.collective, alg, nprocs, self.nbytes, cfg.chunk_bytes)))
        return sorted(out, key=lambda r: r[1])

    def lp_analytic(self, nprocs: int) -> Config | None:
        """LP at the chunk minimising the model's cost formula (:func:`lpmpi.model.optimal_chunk`),
        rounded to the grid (None when the collective has no LP)."""
        if not self.chunked.get("lp"):
            return None
        return self.clamp(Config("lp", int(model.optimal_chunk(self.collective, "lp", nprocs, self.nbytes) or 0)))

    def whole_message(self, algorithm: str = "lp") -> Config | None:
        """``algorithm`` with one chunk for the whole message (the top of the grid's chunks): the
        unpipelined end of its range, often the fastest where a pipeline's per-chunk cost is not
        repaid (None when the collective has no such chunked algorithm)."""
        if not self.chunked.get(algorithm):
            return None
        return self.clamp(Config(algorithm))   # clamp's default chunk: the grid's top

    def warm_start(self, nprocs: int, previous: Sequence[Config] | Config | None = None) -> list[Config]:
        """Configurations to measure first, in order: native (the baseline, always measured), the
        previous (smaller) bucket's choice, the model's predicted best, the previous bucket's
        runner-up, LP with one chunk for the whole message, LP at the analytic chunk, then every
        other algorithm once at its model chunk; in a staging space, last, LP at the analytic
        chunk with each other staging choice (the model knows no staging); in a transport space,
        last, each algorithm that has transports at its model chunk with each transport (the
        model knows no transport).

        The neighbouring bucket's measured ranking comes first because it predicts this bucket
        better than the model does: the model knows alpha, beta and gamma, not the MPI library's
        protocol switches or the caches, which make the landscape rugged in the chunk size."""
        if isinstance(previous, Config):
            previous = [previous]
        prev = [self.clamp(c) for c in (previous or ())]
        ranked = [c for c, _ in self.predictions(nprocs)]
        lp = self.lp_analytic(nprocs)
        order = [Config(NATIVE)] if NATIVE in self.chunked else []
        order += prev[:1] + ranked[:1] + prev[1:2]
        order += [c for c in (self.whole_message(), lp) if c is not None]
        seen = {c.algorithm for c in order}
        order += [c for c in ranked[1:] if c.algorithm not in seen]
        if lp is not None and self.staging:
            order += [Config(lp.algorithm, lp.chunk_bytes, w) for w in self.staging]
        order += [Config(c.algorithm, c.chunk_bytes, c.staging_buffers, tp)
                  for c in ranked if c.algorithm in self.transported for tp in self.transports]
        return list(dict.fromkeys(order))
