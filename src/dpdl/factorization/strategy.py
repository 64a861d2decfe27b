"""What a time-correlated mechanism's target returns: a local encoder, with what its noise stream
needs to keep little state.

A target of `dpdl.choices.FACTORIZED_REGISTRY` returns the local encoder
`C_local` (lower triangular `T x T`, or `n x T x T`) as an array, or a
[`Strategy`][dpdl.factorization.strategy.Strategy]: the same encoder with its exact inverse (a
banded `C^-1`, which `C`'s numerical inverse is only up to rounding) or the buffer of a buffered
linear Toeplitz `C`, from which the engine draws the noise `C^-1 Z` with `O(d)` state per agent
and coordinate instead of every seed
([`LocalCorrelatedNoise`][dpdl.mechanisms.time_correlated.LocalCorrelatedNoise]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Strategy", "as_strategy"]


@dataclass(frozen=True)
class Strategy:
    """A local encoder `C` (`encoder`, dense), optionally with its exact inverse `decoder` and,
    for a buffered linear Toeplitz `C` (`c_0 = 1`, `c_k = sum_i omega_i theta_i^(k-1)`), its
    buffer `(theta, omega)`."""

    encoder: np.ndarray
    decoder: np.ndarray | None = None
    buffer: tuple[np.ndarray, np.ndarray] | None = None


def as_strategy(result: np.ndarray | Strategy) -> Strategy:
    """A target's result as a [`Strategy`][dpdl.factorization.strategy.Strategy] (an array is
    the encoder alone), its arrays float64 and read-only."""
    if not isinstance(result, Strategy):
        result = Strategy(np.asarray(result, dtype=float))
    arrays = [result.encoder, result.decoder, *(result.buffer or ())]
    frozen = [None if a is None else np.array(a, dtype=float) for a in arrays]
    for array in frozen:
        if array is not None:
            array.setflags(write=False)
    buffer = None if result.buffer is None else (frozen[2], frozen[3])
    return Strategy(frozen[0], frozen[1], buffer)
