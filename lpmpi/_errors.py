"""lpmpi's exceptions: a small, picklable hierarchy."""


class LPError(RuntimeError):
    """An internal MPI or CUDA failure; the message is the library's error string."""


class MismatchError(ValueError):
    """LPMPI_CHECK=1 found ranks disagreeing on count, dtype, op, root or algorithm."""
