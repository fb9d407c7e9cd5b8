"""Type stubs of lpmpi's public API (see API.md)."""
from typing import Any, Literal, Optional, Tuple, TypeVar, Union

from mpi4py import MPI

from lpmpi import tables as tables
from lpmpi._explain import Explanation
from lpmpi._ops import Op as Op
from lpmpi.tables import TuningWarning as TuningWarning

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

Collective = Literal["allreduce", "reduce", "bcast"]
OpLike = Union[Op, MPI.Op, str]
B = TypeVar("B")

def allreduce(sendbuf: Any, recvbuf: Optional[B] = None, op: OpLike = ..., comm: Optional[MPI.Comm] = None,
              *, algorithm: str = "auto", chunk_bytes: Optional[int] = None) -> Any: ...
def reduce(sendbuf: Any, recvbuf: Optional[B] = None, op: OpLike = ..., root: int = 0,
           comm: Optional[MPI.Comm] = None, *, algorithm: str = "auto",
           chunk_bytes: Optional[int] = None) -> Any: ...
def bcast(buf: B, root: int = 0, comm: Optional[MPI.Comm] = None, *, algorithm: str = "auto",
          chunk_bytes: Optional[int] = None) -> B: ...
def algorithms(collective: Collective) -> Tuple[str, ...]: ...
def select(collective: Collective, nbytes: int, comm: Optional[MPI.Comm] = None,
           memory: Literal["host", "cuda"] = "host") -> Tuple[str, Optional[int]]: ...
def explain(collective: Collective, nbytes: int, comm: Optional[MPI.Comm] = None,
            memory: Literal["host", "cuda"] = "host") -> Explanation: ...
