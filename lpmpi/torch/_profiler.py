"""torch.profiler: each collective of backend "lpmpi" recorded as torch's own backends record
theirs.

torch's NCCL and gloo backends wrap each collective in a "record_param_comms" record function
whose metadata (collective name, dtype, message sizes, the group's ranks, a sequence number)
torch.profiler's traces carry and trace tools read; a Python backend gets none unless it
records them itself.  While a profiler runs, each collective method of the group
(ProcessGroupLpmpi, lpmpi/torch/_group.py, which hands its class to ``_profile``) is one record
named "lpmpi.<collective>" with the same keys (the name "record_param_comms" itself makes torch
2.13's profiler read a C++ ParamCommsDebugInfo that Python cannot set: it crashes without one);
otherwise the method is called directly (one check, ~0.05 us).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from mpi4py import MPI

from lpmpi import _colls

_profiler_on = torch._C._autograd._profiler_enabled
_RecordFast = torch._C._profiler._RecordFunctionFast
_SCALAR = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
           torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char",
           torch.uint8: "Byte", torch.bool: "Bool", torch.complex64: "ComplexFloat",
           torch.complex128: "ComplexDouble"}
# method -> (torch's collective name, position of its outputs, of its inputs (None: none)): the
# collectives' methods from their descriptor (lpmpi/_colls.py), then the point-to-point ones
_COMMS = {m.method: (m.torch_name, m.out_at, m.in_at) for c in _colls.COLLECTIVES for m in c.torch}
_COMMS.update({"barrier": ("barrier", None, None), "send": ("send", 0, 0), "recv": ("recv", 0, 0)})


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _tensors(y)]
    return []


def _comms_record(pg: dist.ProcessGroup, name: str, out_at: int | None, in_at: int | None, args: tuple):
    """The record of one collective of ``pg`` (a ProcessGroupLpmpi), with torch's keys."""
    outs = _tensors(args[out_at]) if out_at is not None and len(args) > out_at else []
    ins = _tensors(args[in_at]) if in_at is not None and len(args) > in_at else []
    one = (ins or outs or [None])[0]
    if pg._granks is None:
        w = MPI.COMM_WORLD.Get_group()
        g = pg._comm.Get_group()
        pg._granks = list(MPI.Group.Translate_ranks(g, list(range(g.Get_size())), w))
        g.Free()
        w.Free()
    ranks = pg._granks
    backend = pg.getBackendName()     # "lpmpi"
    stride = ranks[1] - ranks[0] if len(ranks) > 1 else 1
    meta = {"Collective name": name, "dtype": _SCALAR.get(one.dtype, str(one.dtype)) if one is not None else "",
            "In msg nelems": sum(t.numel() for t in ins), "Out msg nelems": sum(t.numel() for t in outs),
            "In split size": "[]", "Out split size": "[]", "Group size": len(ranks), "Rank": pg.rank(),
            "Global rank start": ranks[0], "Global rank stride": stride if ranks == list(
                range(ranks[0], ranks[0] + stride * len(ranks), stride)) else -1,
            "Process Group Name": getattr(pg, "_name", None) or "", "Process Group Description": pg.group_desc,
            "Process Group Ranks": str(ranks), "Seq": pg._seq, "Backend": backend}
    return _RecordFast(f"{backend}.{name}", ins or outs or [torch.empty(0)], meta)


def _profiled(method: str, fn):
    name, out_at, in_at = _COMMS[method]

    def call(self, *args, **kw):
        self._seq += 1                        # the group's collectives, profiled or not
        if not _profiler_on():
            return fn(self, *args, **kw)
        with _comms_record(self, name, out_at, in_at, args):
            return fn(self, *args, **kw)

    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return call


def _profile(cls: type) -> None:
    """Wrap each collective method of the group's class (the names of ``_COMMS``) in its record."""
    for m in _COMMS:
        setattr(cls, m, _profiled(m, getattr(cls, m)))
