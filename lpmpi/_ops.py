"""Reduction operations (values are the C engine's op codes, lp_op_t)."""
import enum


class Op(enum.IntEnum):
    """Reduction operations: ``lpmpi.SUM`` … ``lpmpi.BXOR``."""

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
