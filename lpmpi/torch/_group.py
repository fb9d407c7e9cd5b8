"""torch.distributed backend "lpmpi": its process group, ``Options`` and the checks of its
arguments (``lpmpi.torch`` imports it and registers the backend: lpmpi/torch/_rendezvous.py).

A Python ``torch.distributed.ProcessGroup`` on an MPI communicator: allreduce, reduce, bcast,
allgather and reduce_scatter (uneven lists through allgatherv and reduce_scatter with counts),
gather, scatter and all-to-all (even and uneven splits: alltoall / alltoallv) run lpmpi's
algorithms as nonblocking requests (LPMPI_CHECK, the watchdog); send/recv and barrier run
MPI's own calls through mpi4py.  Every call returns a
``Work`` at once; ``wait()`` completes it in the calling thread (no thread hop: the common
``async_op=False`` path costs one lpmpi request), ``get_future()`` hands the request to one
completer thread that completes the future when the request does (DDP chains its buckets on
those futures): lpmpi/torch/_work.py.  While torch.profiler runs, each collective is recorded
as torch's own backends record theirs (lpmpi/torch/_profiler.py).

How torch reaches it (2.13): ``dist.*`` call the Python names (``allreduce``,
``all_gather_single``, ``reduce_scatter_single``, ``all_to_all_single``, ``*_coalesced``,
``allgather``, ``reduce_scatter``, ``gather``, ``scatter``, ``alltoall``, ``send``, ``recv``,
``barrier``); C++ callers (DDP's reducer and its parameter broadcast, functional collectives)
reach the C++ names through pybind's trampoline (``allreduce``, ``broadcast``, ``allgather``,
``_allgather_base``, ``allgather_into_tensor_coalesced``, ``reduce_scatter_tensor_coalesced``,
``alltoall_base``, ...): both sets are defined here.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from mpi4py import MPI

import lpmpi
from lpmpi.torch._profiler import _profile
from lpmpi.torch._work import _DONE, _Keep, _Work, _wait_one

BACKEND = "lpmpi"

# torch's ops by their enum's value (a dict keyed by the pybind enum itself costs 1 us more a
# call: its hash goes through Python)
_OPS = {op.value: name for op, name in (
    (dist.ReduceOp.SUM, "sum"), (dist.ReduceOp.AVG, "avg"), (dist.ReduceOp.PRODUCT, "prod"),
    (dist.ReduceOp.MIN, "min"), (dist.ReduceOp.MAX, "max"), (dist.ReduceOp.BAND, "band"),
    (dist.ReduceOp.BOR, "bor"), (dist.ReduceOp.BXOR, "bxor"))}
_PREMUL = dist.ReduceOp.PREMUL_SUM.value
_HALF = (torch.float16, torch.bfloat16)
_ACC_OPS = ("sum", "avg")
_STRIDED = torch.strided
_CPU = torch.device("cpu")
_CUSTOM = dist.ProcessGroup.BackendType.CUSTOM


class Options:
    """``pg_options`` of ``init_process_group("lpmpi", pg_options=...)`` / ``new_group``.

    comm: the mpi4py communicator the default group runs on (None: ``MPI.COMM_WORLD``); its
    size must be torch's world size and its ranks torch's ranks.  Subgroups (``new_group``) are
    made from it with ``MPI_Comm_create_group`` (only their members call it, as torch does).
    algorithm, chunk_bytes: passed to lpmpi's collectives (as ``lpmpi.allreduce``).
    acc_dtype: how float16 / bfloat16 tensors are summed (SUM, AVG, PREMUL_SUM): "float32"
    (default: in float32, rounded once) or None (in their own precision)."""

    def __init__(self, comm: MPI.Comm | None = None, *, algorithm: str = "auto",
                 chunk_bytes: int | None = None, acc_dtype: str | None = "float32") -> None:
        if comm is not None and not isinstance(comm, MPI.Intracomm):
            raise TypeError(f"comm must be an mpi4py intracommunicator or None, got "
                            f"{type(comm).__name__}")
        if acc_dtype not in (None, "float32"):
            raise ValueError(f"acc_dtype must be 'float32' or None, got {acc_dtype!r}")
        if algorithm != "auto" and not isinstance(algorithm, str):
            raise TypeError(f"algorithm must be a string, got {type(algorithm).__name__}")
        self.comm = comm
        self.algorithm = algorithm
        self.chunk_bytes = chunk_bytes
        self.acc_dtype = acc_dtype

    def __repr__(self) -> str:
        return (f"lpmpi.torch.Options(comm={self.comm!r}, algorithm={self.algorithm!r}, "
                f"chunk_bytes={self.chunk_bytes!r}, acc_dtype={self.acc_dtype!r})")



# ---- tensors as buffers ----

def _check(t: torch.Tensor, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"lpmpi backend: {what} expects tensors, got {type(t).__name__}")
    if not t.is_cpu:
        raise RuntimeError(f"lpmpi backend: {what} got a tensor on {t.device}; backend 'lpmpi' "
                           f"handles CPU tensors only (use 'cpu:lpmpi,cuda:nccl' for a mixed group)")
    if t.layout != torch.strided:
        raise TypeError(f"lpmpi backend: {what} cannot take a {t.layout} tensor")


def _check_list(what: str, one: torch.Tensor, one_role: str, many: list, many_role: str,
                P: int, uneven: bool = False) -> bool:
    """A list form's P tensors: each the dtype of the one on the other side, and its size (or,
    with uneven, any sizes: the v collectives, where ``one`` is this rank's).  Returns True when
    the sizes differ."""
    _check(one, what)
    if len(many) != P:
        raise ValueError(f"lpmpi backend: {what} needs a list of {P} {many_role} tensors, got "
                         f"{len(many)}")
    differ = False
    for t in many:
        _check(t, what)
        if t.dtype != one.dtype or (t.numel() != one.numel() and not uneven):
            raise ValueError(f"lpmpi backend: {what}'s {many_role} tensors must have the "
                             f"{one_role}'s size and dtype")
        differ |= t.numel() != one.numel()
    return differ


def _dense(t: torch.Tensor):
    """(a contiguous tensor with t's data, a function that copies it back into t or None)."""
    if t.is_contiguous():
        return t, None
    c = t.contiguous()
    return c, (lambda: t.copy_(c))


def _bytes(t: torch.Tensor):
    """t's bytes as a numpy uint8 array (t contiguous): mpi4py's buffer for data movement."""
    return t.reshape(-1).view(torch.uint8).numpy()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do two contiguous tensors share bytes?"""
    if not a.numel() or not b.numel():
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def _chain(*fns):
    fns = [f for f in fns if f is not None]
    if not fns:
        return None
    if len(fns) == 1:
        return fns[0]

    def run() -> None:
        for f in fns:
            f()
    return run


def _root(opts: Any) -> int:
    return 0 if opts is None else opts.rootRank



# the default group's communicator (a duplicate): made by _create (lpmpi/torch/_rendezvous.py),
# freed by the group's shutdown
_base_comm: MPI.Intracomm | None = None


class ProcessGroupLpmpi(dist.ProcessGroup):
    """Backend "lpmpi": a torch process group on an MPI communicator (see the module)."""

    def __init__(self, comm: MPI.Intracomm, options: Options, timeout: float) -> None:
        super().__init__(comm.Get_rank(), comm.Get_size())
        # the device type, as torch registers it for its own backends: _new_process_group_helper
        # makes a ProcessGroup and calls pg._register_backend(device, type, backend) for each
        # device of the backend (gloo's: cpu and cuda, type GLOO) and pg._set_default_backend,
        # but a creator that returns a Python ProcessGroup replaces that group before either
        # call, so this group registers "cpu" (type CUSTOM, as torch gives plugins) itself.
        # _device_types is read by set_model_state_dict / set_optimizer_state_dict with
        # broadcast_from_rank0 (_broadcast_tensors: pg._device_types[0]), DCP's async_save,
        # _get_pg_default_device and _get_object_coll_device.  No C++ Backend object goes with
        # it (torch makes Backend unconstructible from Python): _get_backend below answers
        # for "cpu" with this group
        self._register_backend(_CPU, _CUSTOM, None)
        self._set_default_backend(_CUSTOM)
        self._comm = comm
        self._opts = options
        self._timeout = timeout
        # lpmpi's keywords, where they are not its defaults (each costs an 8 B call ~0.1 us)
        self._kw: dict[str, Any] = {}
        if options.algorithm != "auto":
            self._kw["algorithm"] = options.algorithm
        if options.chunk_bytes is not None:
            self._kw["chunk_bytes"] = options.chunk_bytes
        self._kwc: dict[str, dict[str, Any]] = {}
        self._seq = 0                         # collectives recorded for torch.profiler
        self._granks: list[int] | None = None

    def _kw_for(self, collective: str) -> dict[str, Any]:
        """lpmpi's keywords for a collective the group's ``algorithm`` may not name (gather,
        scatter, all-to-all, the v forms: those calls went to mpi4py before): its algorithm
        where it is one of the collective's, else auto."""
        kw = self._kwc.get(collective)
        if kw is None:
            kw = dict(self._kw)
            if kw.get("algorithm") not in (None, *lpmpi.algorithms(collective)):
                del kw["algorithm"]
            self._kwc[collective] = kw
        return kw

    # -- identity --
    def getBackendName(self) -> str:
        return BACKEND

    def _get_backend(self, device) -> Any:
        """The backend serving ``device``: for "cpu" this group itself (gloo's group answers
        with its ProcessGroupGloo: name(), rank(), size(), the supports_* flags below); any
        other device raises torch's own RuntimeError, as a gloo-only group does for "xpu"."""
        dev = torch.device(device) if not isinstance(device, torch.device) else device
        if dev.type == "cpu":
            return self
        return super()._get_backend(dev)

    # what torch asks of a backend (c10d::Backend's flags; all False for this one, as the
    # ProcessGroup base answers where nothing is registered): no communicator splitting
    # (new_group makes its communicator with MPI), no coalescing manager (the *_coalesced
    # calls are implemented here), no backend-allocated tensors, no time estimates
    supports_splitting = False
    supports_shrinking = False
    supports_coalescing = False
    supports_time_estimate = False

    def supports_tensor_alloc(self, device) -> bool:
        return False

    # torch names its groups after making them; the C++ base keeps a name only for the
    # backends registered in it (none here), so the name and description live here
    # (DeviceMesh, FSDP2 and the functional collectives look groups up by name)
    def _set_group_name(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:
        name = getattr(self, "_name", None)
        if name is None:
            raise RuntimeError("ProcessGroup name not set")
        return name

    def _set_group_desc(self, desc: str) -> None:
        self._desc = desc

    @property
    def group_desc(self) -> str:
        return getattr(self, "_desc", "")

    @property
    def comm(self) -> MPI.Intracomm:
        """The MPI communicator this group runs on (a private duplicate or sub-communicator)."""
        return self._comm

    def __repr__(self) -> str:
        return f"ProcessGroupLpmpi(rank={self._comm.Get_rank()}, size={self._comm.Get_size()})"

    def _coalesced(self, one, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                   opts: Any) -> dist.Work:
        """A coalesced form: the one-tensor call per pair, one Work over them."""
        works = [one(o, i, opts) for o, i in zip(outputs, inputs, strict=True)]
        return self._w(opts, works, outputs)

    def _w(self, opts, reqs, result, after=None) -> dist.Work:
        """The call's Work.  torch's Python front end says whether the caller waits at once
        (``opts.asyncOp`` False: ``dist.all_reduce(x)``): then the call completes here and a
        shared completed Work is returned (no per-call Work object; at 8 B a Work costs about
        1 us, a quarter of the backend's own time).  C++ callers (DDP) leave asyncOp true."""
        if opts is not None and not getattr(opts, "asyncOp", True):
            for r in reqs:
                _wait_one(r, self._timeout)
            if after is not None:
                after()
            return _DONE
        return _Work(reqs, result, after, self._timeout)

    # -- reduction op --
    def _op(self, opts, what: str):
        """(lpmpi's op, a factor to multiply the inputs by first, or None)."""
        if opts is None:
            return "sum", None
        rop = opts.reduceOp                 # a ReduceOp: its RedOpType in .op
        kind = rop.op.value
        if kind == _PREMUL:
            f = getattr(rop, "factor", None)
            if f is None:
                raise ValueError(f"lpmpi backend: {what} got PREMUL_SUM without a factor")
            return "sum", f
        try:
            return _OPS[kind], None
        except KeyError:
            raise ValueError(f"lpmpi backend: {what} does not support ReduceOp {rop.op}") from None

    def _acc(self, op: str, dtype: torch.dtype) -> str | None:
        return self._opts.acc_dtype if dtype in _HALF and op in _ACC_OPS else None

    @staticmethod
    def _premul(t: torch.Tensor, f) -> torch.Tensor:
        """t times the factor (a float or a one-element tensor), as a new tensor."""
        return t * (f.item() if isinstance(f, torch.Tensor) else f)

    # -- lpmpi's collectives --
    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        if len(tensors) == 1 and opts is not None and not opts.asyncOp:
            # dist.all_reduce(x): one blocking call, the fewest Python steps (torch's front end
            # checked that x is a tensor; anything unusual takes the general path below)
            t = tensors[0]
            if t.layout is _STRIDED and t.is_cpu and t.is_contiguous():
                op = _OPS.get(opts.reduceOp.op.value)
                if op is not None:
                    if t.dtype in _HALF and op in _ACC_OPS:
                        lpmpi.allreduce(lpmpi.IN_PLACE, t, op, self._comm,
                                        acc_dtype=self._opts.acc_dtype, **self._kw)
                    else:
                        lpmpi.allreduce(lpmpi.IN_PLACE, t, op, self._comm, **self._kw)
                    return _DONE
        reqs, afters = [], []
        for t in tensors:
            _check(t, "allreduce")
            op, f = self._op(opts, "allreduce")
            d, back = _dense(t)
            if f is not None:
                d.copy_(self._premul(d, f))
            reqs.append(lpmpi.iallreduce(lpmpi.IN_PLACE, d, op=op, comm=self._comm,
                                         acc_dtype=self._acc(op, t.dtype), **self._kw))
            afters.append(back)
        return self._w(opts, reqs, tensors, _chain(*afters))

    def allreduce_coalesced(self, tensors: list[torch.Tensor],
                            opts: Any = None) -> dist.Work:
        dtypes = {t.dtype for t in tensors}
        if len(tensors) <= 1 or len(dtypes) != 1:
            return self.allreduce(tensors, opts)
        for t in tensors:
            _check(t, "allreduce_coalesced")
        flat = torch.cat([t.reshape(-1) for t in tensors])   # one request for all of them
        op, f = self._op(opts, "allreduce_coalesced")
        if f is not None:
            flat = self._premul(flat, f)
        req = lpmpi.iallreduce(lpmpi.IN_PLACE, flat, op=op, comm=self._comm,
                               acc_dtype=self._acc(op, flat.dtype), **self._kw)

        def back() -> None:
            o = 0
            for t in tensors:
                n = t.numel()
                t.copy_(flat[o:o + n].view(t.shape))
                o += n
        return self._w(opts, [req], tensors, back)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        reqs, afters = [], []
        for t in tensors:
            _check(t, "reduce")
            op, f = self._op(opts, "reduce")
            d, back = _dense(t)
            src = d
            if f is not None:
                src = self._premul(d, f)
            sendbuf = lpmpi.IN_PLACE if src is d else src.reshape(-1)
            reqs.append(lpmpi.ireduce(sendbuf, d.reshape(-1), op=op, root=_root(opts),
                                      comm=self._comm, acc_dtype=self._acc(op, t.dtype), **self._kw))
            afters.append(back if self._comm.Get_rank() == _root(opts) else None)
        return self._w(opts, reqs, tensors, _chain(*afters))

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        reqs, afters = [], []
        for t in tensors:
            _check(t, "broadcast")
            d, back = _dense(t)
            reqs.append(lpmpi.ibcast(d.reshape(-1), root=_root(opts), comm=self._comm, **self._kw))
            afters.append(back)
        return self._w(opts, reqs, tensors, _chain(*afters))

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor,
                        opts: Any = None) -> dist.Work:
        _check(output, "all_gather_into_tensor")
        _check(input, "all_gather_into_tensor")
        P = self._comm.Get_size()
        if output.numel() != input.numel() * P or output.dtype != input.dtype:
            raise ValueError(f"lpmpi backend: all_gather_into_tensor needs an output of "
                             f"{P} x {input.numel()} {input.dtype} elements, got {output.numel()} "
                             f"{output.dtype}")
        d, back = _dense(output)
        x, _ = _dense(input)
        n, r = x.numel(), self._comm.Get_rank()
        if back is None and n and x.data_ptr() == d.data_ptr() + r * n * d.element_size():
            send = lpmpi.IN_PLACE       # the input is the output's block r (FSDP2 does this)
        else:
            send = (x.clone() if _overlap(x, d) else x).reshape(-1)
        req = lpmpi.iallgather(send, d.view(P, -1) if n else d.reshape(P, 0), comm=self._comm,
                               **self._kw)
        return self._w(opts, [req], [output], back)

    all_gather_single = _allgather_base

    def allgather_into_tensor_coalesced(self, outputs: list[torch.Tensor],
                                        inputs: list[torch.Tensor],
                                        opts: Any = None) -> dist.Work:
        return self._coalesced(self._allgather_base, outputs, inputs, opts)

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def allgather(self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor],
                  opts: Any = None) -> dist.Work:
        P = self._comm.Get_size()
        reqs, afters = [], []
        for outs, x in zip(output_lists, inputs, strict=True):
            xd, _ = _dense(x)
            if _check_list("all_gather", x, "input", outs, "output", P, uneven=True):
                counts = [o.numel() for o in outs]       # uneven: allgatherv
                if counts[self._comm.Get_rank()] != x.numel():
                    raise ValueError(f"lpmpi backend: all_gather's output {self._comm.Get_rank()} "
                                     f"must have the input's {x.numel()} elements")
                buf = torch.empty(sum(counts), dtype=x.dtype)
                reqs.append(lpmpi.iallgatherv(xd.reshape(-1), buf, counts, comm=self._comm, **self._kw_for("allgatherv")))
                offs = [sum(counts[:q]) for q in range(P)]

                def back(outs=outs, buf=buf, offs=offs) -> None:
                    for q, o in enumerate(outs):
                        o.copy_(buf[offs[q]:offs[q] + o.numel()].view(o.shape))
            else:
                buf = torch.empty((P, x.numel()), dtype=x.dtype)
                reqs.append(lpmpi.iallgather(xd.reshape(-1), buf, comm=self._comm, **self._kw))

                def back(outs=outs, buf=buf) -> None:
                    for q, o in enumerate(outs):
                        o.copy_(buf[q].view(o.shape))
            afters.append(back)
        return self._w(opts, reqs, [o for outs in output_lists for o in outs], _chain(*afters))

    def allgather_coalesced(self, output_lists, inputs, opts: Any = None) -> dist.Work:
        return self.allgather(output_lists, inputs, opts)

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor,
                             opts: Any = None) -> dist.Work:
        _check(output, "reduce_scatter_tensor")
        _check(input, "reduce_scatter_tensor")
        P = self._comm.Get_size()
        if input.numel() != output.numel() * P or output.dtype != input.dtype:
            raise ValueError(f"lpmpi backend: reduce_scatter_tensor needs an input of "
                             f"{P} x {output.numel()} {output.dtype} elements, got {input.numel()} "
                             f"{input.dtype}")
        op, f = self._op(opts, "reduce_scatter_tensor")
        x, _ = _dense(input)
        d, back = _dense(output)
        if f is not None:
            x = self._premul(x, f)
        elif _overlap(x, d):            # the output inside the input (in place, NCCL's way)
            x = x.clone()
        req = lpmpi.ireduce_scatter(x.reshape(P, -1), d.reshape(-1), op=op, comm=self._comm,
                                    acc_dtype=self._acc(op, input.dtype), **self._kw)
        return self._w(opts, [req], [output], back)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs: list[torch.Tensor],
                                        inputs: list[torch.Tensor],
                                        opts: Any = None) -> dist.Work:
        return self._coalesced(self._reduce_scatter_base, outputs, inputs, opts)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def reduce_scatter(self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]],
                       opts: Any = None) -> dist.Work:
        P = self._comm.Get_size()
        reqs, afters = [], []
        for out, ins in zip(outputs, input_lists, strict=True):
            uneven = _check_list("reduce_scatter", out, "output", ins, "input", P, uneven=True)
            op, f = self._op(opts, "reduce_scatter")
            counts = [t.numel() for t in ins] if uneven else None   # uneven: MPI_Reduce_scatter
            if uneven and counts[self._comm.Get_rank()] != out.numel():
                raise ValueError(f"lpmpi backend: reduce_scatter's input {self._comm.Get_rank()} "
                                 f"must have the output's {out.numel()} elements")
            x = torch.cat([t.reshape(-1) for t in ins]) if uneven else torch.stack([t.reshape(-1) for t in ins])
            if f is not None:
                x = self._premul(x, f)
            d, back = _dense(out)
            reqs.append(lpmpi.ireduce_scatter(x, d.reshape(-1), op=op, comm=self._comm,
                                              acc_dtype=self._acc(op, out.dtype), counts=counts,
                                              **(self._kw_for("reduce_scatter_v") if uneven else self._kw)))
            afters.append(back)
        return self._w(opts, reqs, outputs, _chain(*afters))

    def gather(self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor],
               opts: Any = None) -> dist.Work:
        if len(inputs) != 1:
            raise ValueError(f"lpmpi backend: gather takes one input tensor, got {len(inputs)}")
        P, root = self._comm.Get_size(), _root(opts)
        x, _ = _dense(inputs[0])
        _check(x, "gather")
        if self._comm.Get_rank() != root:
            return self._w(opts, [lpmpi.igather(x.reshape(-1), None, root=root, comm=self._comm, **self._kw_for("gather"))], [])
        outs = output_lists[0] if output_lists else []
        _check_list("gather", x, "input", outs, "output", P)
        buf = torch.empty((P, x.numel()), dtype=x.dtype)
        req = lpmpi.igather(x.reshape(-1), buf, root=root, comm=self._comm, **self._kw_for("gather"))

        def back() -> None:
            for q, o in enumerate(outs):
                o.copy_(buf[q].view(o.shape))
        return self._w(opts, [req], list(outs), back)

    def scatter(self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]],
                opts: Any = None) -> dist.Work:
        if len(outputs) != 1:
            raise ValueError(f"lpmpi backend: scatter takes one output tensor, got {len(outputs)}")
        P, root = self._comm.Get_size(), _root(opts)
        out = outputs[0]
        _check(out, "scatter")
        d, back = _dense(out)
        send = None
        if self._comm.Get_rank() == root:
            ins = input_lists[0] if input_lists else []
            _check_list("scatter", out, "output", ins, "input", P)
            send = torch.stack([t.reshape(-1) for t in ins])
        req = lpmpi.iscatter(send, d.reshape(-1), root=root, comm=self._comm, **self._kw_for("scatter"))
        return self._w(opts, [req], outputs, back)

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor,
                      output_split_sizes: list[int], input_split_sizes: list[int],
                      opts: Any = None) -> dist.Work:
        _check(output, "all_to_all_single")
        _check(input, "all_to_all_single")
        if output.dtype != input.dtype:
            raise ValueError(f"lpmpi backend: all_to_all_single's input and output must have one "
                             f"dtype, got {input.dtype} and {output.dtype}")
        P = self._comm.Get_size()
        x, _ = _dense(input)
        d, back = _dense(output)
        if not input_split_sizes and not output_split_sizes:   # even: alltoall
            for t, what in ((x, "input"), (d, "output")):
                if t.dim() == 0 or t.shape[0] % P:
                    raise ValueError(f"lpmpi backend: all_to_all_single without split sizes needs "
                                     f"an {what} whose first dimension divides by {P}")
            if x.numel() != d.numel():
                raise ValueError("lpmpi backend: all_to_all_single's input and output differ in size")
            req = lpmpi.ialltoall(x.reshape(-1), d.reshape(-1), comm=self._comm, **self._kw_for("alltoall"))
            return self._w(opts, [req], [output], back)

        def counts(splits, t, what):                        # uneven: alltoallv, in elements
            row = t[0].numel() if t.dim() and t.shape[0] else 0
            if not splits:
                if t.dim() == 0 or t.shape[0] % P:
                    raise ValueError(f"lpmpi backend: all_to_all_single without {what} needs a "
                                     f"first dimension divisible by {P}")
                return [t.numel() // P] * P
            if len(splits) != P or sum(splits) != (t.shape[0] if t.dim() else 0):
                raise ValueError(f"lpmpi backend: all_to_all_single's {what} must be {P} sizes "
                                 f"summing to the first dimension")
            return [s * row for s in splits]
        sc = counts(input_split_sizes, x, "input_split_sizes")
        rc = counts(output_split_sizes, d, "output_split_sizes")
        req = lpmpi.ialltoallv(x.reshape(-1), sc, d.reshape(-1), rc, comm=self._comm, **self._kw_for("alltoallv"))
        return self._w(opts, [req], [output], back)

    all_to_all_single = alltoall_base

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                 opts: Any = None) -> dist.Work:
        P = self._comm.Get_size()
        if len(outputs) != P or len(inputs) != P:
            raise ValueError(f"lpmpi backend: all_to_all needs {P} input and {P} output tensors")
        for t in (*outputs, *inputs):
            _check(t, "all_to_all")
        # the tensors' bytes, one block per peer: alltoallv of uint8 (any dtype, any sizes)
        send = torch.cat([_dense(t)[0].reshape(-1).view(torch.uint8) for t in inputs])
        sc = [t.numel() * t.element_size() for t in inputs]
        rc = [t.numel() * t.element_size() for t in outputs]
        recv = torch.empty(sum(rc), dtype=torch.uint8)
        req = lpmpi.ialltoallv(send, sc, recv, rc, comm=self._comm, **self._kw_for("alltoallv"))

        def back() -> None:
            o = 0
            for t, n in zip(outputs, rc):
                t.copy_(recv[o:o + n].view(t.dtype).view(t.shape))
                o += n
        return self._w(opts, [req], outputs, back)

    # -- MPI's own calls (mpi4py), on the tensors' bytes --
    def barrier(self, opts: Any = None) -> dist.Work:
        return self._w(opts, [self._comm.Ibarrier()], [])

    def send(self, tensors: list[torch.Tensor], dstRank: int, tag: int) -> dist.Work:
        reqs = []
        for t in tensors:
            _check(t, "send")
            x, _ = _dense(t)
            reqs.append(self._comm.Isend(_bytes(x), dest=dstRank, tag=tag))
            reqs.append(_Keep(x))
        return self._w(None, reqs, tensors)

    def recv(self, tensors: list[torch.Tensor], srcRank: int, tag: int) -> dist.Work:
        reqs, afters = [], []
        for t in tensors:
            _check(t, "recv")
            d, back = _dense(t)
            reqs.append(self._comm.Irecv(_bytes(d), source=srcRank, tag=tag))
            afters.append(back)
        return self._w(None, reqs, tensors, _chain(*afters))

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int) -> dist.Work:
        raise RuntimeError("lpmpi backend: recv without a source (recv_anysource) is not "
                           "supported; pass src=")

    def shutdown(self) -> None:
        """destroy_process_group: free the group's communicator (lpmpi's context for it goes
        with it, through its MPI attribute's delete callback)."""
        global _base_comm
        c, self._comm = self._comm, None
        if c is None or MPI.Is_finalized():
            return
        if c is _base_comm:
            _base_comm = None
        c.Free()

    def size(self) -> int:
        return self._comm.Get_size()

    def rank(self) -> int:
        return self._comm.Get_rank()


_profile(ProcessGroupLpmpi)     # its collectives recorded while torch.profiler runs
