"""Type stubs of lpmpi's public API (docs/api.md)."""
import enum
from typing import Any, Literal, Optional, Tuple, TypeVar, Union

from mpi4py import MPI

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
