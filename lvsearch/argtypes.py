"""Number types for command-line options, checked at parse time.

Every numeric option of every verb is parsed by one of these, so a value that is not a finite
number in the option's range (``1e999``, ``nan``, ``inf``, a negative learning rate) is one
argparse error naming the option (exit 2, no traceback), before anything is loaded or written.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def finite_float(text: str) -> float:
    """Any finite float."""
    return _number(text)


def float_in(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> Callable[[str], float]:
    """A finite float in ``[lo, hi]`` (an end excluded when ``lo_open``/``hi_open``)."""
    def parse(text: str) -> float:
        v = _number(text)
        if v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi):
            raise argparse.ArgumentTypeError(
                f"{text!r} is outside {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}")
        return v
    parse.__name__ = "number"
    return parse


def positive_float(text: str) -> float:
    """A finite float > 0."""
    v = _number(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return v


def count(text: str) -> int:
    """A non-negative integer, also written as ``5e6`` or ``5_000_000``, below 2⁶³."""
    try:
        v = int(text.replace("_", "")) if not any(c in text for c in "eE.") else _number(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if isinstance(v, float):
        if v != int(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        v = int(v)
    if not 0 <= v < 2**63:
        raise argparse.ArgumentTypeError(f"{text!r} is outside [0, 2^63)")
    return v


def positive_count(text: str) -> int:
    """:func:`count` that is at least 1."""
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"{text!r} must be ≥ 1")
    v = count(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be ≥ 1")
    return v


def count_in(lo: int, hi: int, why: str = "") -> Callable[[str], int]:
    """A :func:`count` in ``[lo, hi]``; ``why`` (``"a rank correlation needs 3"``) is added to
    the message of a value outside."""
    def parse(text: str) -> int:
        v = -1 if text.strip().startswith("-") else count(text)
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text!r} is outside [{lo:,}, {hi:,}]" + (f" ({why})" if why else ""))
        return v
    parse.__name__ = "count"
    return parse
