"""Bisection for the monotone one-dimensional searches of calibration (noise scales, budgets)."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["geometric_bisect"]


def geometric_bisect(
    upper_side: Callable[[float], bool], low: float, high: float, rtol: float
) -> tuple[float, float]:
    """Shrink `[low, high]` (positive, `upper_side(high)` true, `upper_side(low)` false, the
    predicate monotone) at geometric midpoints until `high / low <= 1 + rtol`; return the
    bracket."""
    while high / low > 1.0 + rtol:
        middle = math.sqrt(low * high)
        if upper_side(middle):
            high = middle
        else:
            low = middle
    return low, high
