"""Type stubs of lpmpi's public API (docs/api.md)."""
import enum
from collections.abc import Iterable
from typing import Any, Literal, TypeVar

from mpi4py import MPI
from typing_extensions import Self, TypeAlias

from lpmpi import tables as tables
from lpmpi._explain import Explanation
from lpmpi.tables import TuningWarning as TuningWarning

class Op(enum.IntEnum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4
    LAND = 5
    LOR = 6
    LXOR = 7
    BAND = 8
    BOR = 9
    BXOR = 10

__version__: str
IN_PLACE: Any

SUM: Op
PROD: Op
MAX: Op
MIN: Op
AVG: Op
LAND: Op
LOR: Op
LXOR: Op
BAND: Op
BOR: Op
BXOR: Op

class LPError(RuntimeError): ...
class MismatchError(ValueError): ...

Collective: TypeAlias = Literal["allreduce", "reduce", "bcast", "allgather", "reduce_scatter"]
OpLike: TypeAlias = Op | MPI.Op | str
_B = TypeVar("_B")

def allreduce(sendbuf: Any, recvbuf: _B | None = None, op: OpLike = "sum", comm: MPI.Comm | None = None,
              *, algorithm: str = "auto", chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Any: ...
def reduce(sendbuf: Any, recvbuf: _B | None = None, op: OpLike = "sum", root: int = 0,
           comm: MPI.Comm | None = None, *, algorithm: str = "auto",
           chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Any: ...
def bcast(buf: _B, root: int = 0, comm: MPI.Comm | None = None, *, algorithm: str = "auto",
          chunk_bytes: int | None = None) -> _B: ...
def allgather(sendbuf: Any, recvbuf: _B | None = None, comm: MPI.Comm | None = None, *,
              algorithm: str = "auto", chunk_bytes: int | None = None) -> Any: ...
def reduce_scatter(sendbuf: Any, recvbuf: _B | None = None, op: OpLike = "sum",
                   comm: MPI.Comm | None = None, *, algorithm: str = "auto",
                   chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Any: ...
class Request:
    def test(self) -> bool: ...
    def wait(self) -> Any: ...
    @property
    def done(self) -> bool: ...
    @property
    def persistent(self) -> bool: ...
    def start(self) -> Request: ...
    def free(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> bool: ...

def iallreduce(sendbuf: Any, recvbuf: Any = None, op: OpLike = "sum", comm: MPI.Comm | None = None,
               *, algorithm: str = "auto", chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Request: ...
def ireduce(sendbuf: Any, recvbuf: Any = None, op: OpLike = "sum", root: int = 0,
            comm: MPI.Comm | None = None, *, algorithm: str = "auto",
            chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Request: ...
def ibcast(buf: Any, root: int = 0, comm: MPI.Comm | None = None, *, algorithm: str = "auto",
           chunk_bytes: int | None = None) -> Request: ...
def allreduce_init(sendbuf: Any, recvbuf: Any = None, op: OpLike = "sum",
                   comm: MPI.Comm | None = None, *, algorithm: str = "auto",
                   chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Request: ...
def reduce_init(sendbuf: Any, recvbuf: Any = None, op: OpLike = "sum", root: int = 0,
                comm: MPI.Comm | None = None, *, algorithm: str = "auto",
                chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Request: ...
def bcast_init(buf: Any, root: int = 0, comm: MPI.Comm | None = None, *, algorithm: str = "auto",
               chunk_bytes: int | None = None) -> Request: ...
def iallgather(sendbuf: Any, recvbuf: Any = None, comm: MPI.Comm | None = None, *,
               algorithm: str = "auto", chunk_bytes: int | None = None) -> Request: ...
def ireduce_scatter(sendbuf: Any, recvbuf: Any = None, op: OpLike = "sum",
                    comm: MPI.Comm | None = None, *, algorithm: str = "auto",
                    chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Request: ...
def allgather_init(sendbuf: Any, recvbuf: Any = None, comm: MPI.Comm | None = None, *,
                   algorithm: str = "auto", chunk_bytes: int | None = None) -> Request: ...
def reduce_scatter_init(sendbuf: Any, recvbuf: Any = None, op: OpLike = "sum",
                        comm: MPI.Comm | None = None, *, algorithm: str = "auto",
                        chunk_bytes: int | None = None, acc_dtype: str | None = None) -> Request: ...
def waitall(requests: Iterable[Request]) -> list[Any]: ...
def progress_thread(on: bool) -> bool: ...
def algorithms(collective: Collective) -> tuple[str, ...]: ...
def select(collective: Collective, nbytes: int, comm: MPI.Comm | None = None,
           memory: Literal["host", "cuda"] = "host") -> tuple[str, int | None]: ...
def explain(collective: Collective, nbytes: int, comm: MPI.Comm | None = None,
            memory: Literal["host", "cuda"] = "host") -> Explanation: ...
