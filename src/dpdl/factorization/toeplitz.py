"""Toeplitz strategies: the square-root factorization and its banded relatives, as local encoders
of MF-D-SGD (noise `C^-1 Z` for every agent, messages `W_T (G + C^-1 Z)`).

A lower-triangular Toeplitz `C` is given by its coefficients `c_0, c_1, ...` (`C[t, s] =
c_(t-s)`), the power series `c(x) = sum_k c_k x^k`; products and inverses of such matrices are
those of their series, truncated to T terms. With `A` the prefix-sum matrix (`a(x) = 1 / (1 -
x)`):

- `sqrt`: `C = A^(1/2)`, `c(x) = (1 - x)^(-1/2)`, `c_k = binom(2k, k) / 4^k` (Fichtenberger,
  Henzinger and Upadhyay, "Constant matters", ICML 2023; Henzinger et al., SODA 2024); `C^-1` has
  the coefficients of `(1 - x)^(1/2)`: `1, -1/2, -1/8, -1/16, ...`. Dense: its noise keeps every
  seed.
- `bsr`: the banded square root (Kalinin and Lampert, "Banded square root matrix factorization
  for differentially private model training", NeurIPS 2024): the first
  `bands` coefficients of `sqrt`, the rest zero. The noise is drawn by forward substitution over
  the last `bands - 1` outputs.
- `bandmf`: a banded Toeplitz `C` (McKenna et al., "Scaling up the banded matrix factorization
  mechanism", 2024; Choquette-Choo et al., NeurIPS 2023, BandMF) whose `bands - 1` free
  coefficients (`c_0 = 1`, the objective is scale-free) minimise
  [`ToeplitzObjective`][dpdl.factorization.toeplitz.ToeplitzObjective] for the gossip's utility Gram
  matrix `H`, by L-BFGS-B from `bsr`'s coefficients.
- `bisr`: the banded inverse square root (Kalinin, Lampert et al., "Back to Square Roots", ICLR
  2026): `C^-1` banded, its first `bands` coefficients those of `(1 - x)^(1/2)`, and `C` its
  inverse (dense Toeplitz, positive coefficients). The noise keeps the last `bands - 1` seeds.

With `bands` at most the separation of two participations (the cycle b of cyclic participation),
the columns of one pattern share no row of a banded `C`, `C^T C` is zero between them, and the
sensitivity is the largest pattern's summed squared column norms, whatever the coefficients'
signs. The sensitivity a run is calibrated with is always computed from the dense `C` by
[`local_sensitivity`][dpdl.factorization.mafalda.local_sensitivity].
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from dpdl.errors import ConfigError
from dpdl.factorization.mafalda import local_loss
from dpdl.factorization.participation import Participation
from dpdl.factorization.strategy import Strategy

__all__ = [
    "ToeplitzObjective",
    "band_of",
    "bandmf_encoder",
    "bisr_strategy",
    "bsr_encoder",
    "inverse_series",
    "inverse_sqrt_coefficients",
    "separation",
    "sqrt_coefficients",
    "sqrt_strategy",
    "toeplitz_loss",
    "toeplitz_matrix",
]


def sqrt_coefficients(count: int) -> np.ndarray:
    """The first `count` coefficients of `(1 - x)^(-1/2)`: `binom(2k, k) / 4^k`, by `c_k =
    c_(k-1) (2k - 1) / (2k)`."""
    ratios = (2.0 * np.arange(1, count) - 1.0) / (2.0 * np.arange(1, count))
    return np.concatenate([[1.0], np.cumprod(ratios)])[:count]


def inverse_sqrt_coefficients(count: int) -> np.ndarray:
    """The first `count` coefficients of `(1 - x)^(1/2)`: `1, -1/2, -1/8, -1/16, ...`, by `r_k =
    r_(k-1) (2k - 3) / (2k)`."""
    ratios = (2.0 * np.arange(1, count) - 3.0) / (2.0 * np.arange(1, count))
    return np.concatenate([[1.0], np.cumprod(ratios)])[:count]


def inverse_series(coefficients: np.ndarray, count: int) -> np.ndarray:
    """The first `count` coefficients of `1 / c(x)` (`c_0 != 0`): the first column of the inverse
    of the lower-triangular Toeplitz matrix of `coefficients`."""
    c = np.zeros(count)
    c[: min(count, len(coefficients))] = coefficients[:count]
    inverse = np.zeros(count)
    inverse[0] = 1.0 / c[0]
    for k in range(1, count):
        inverse[k] = -np.dot(c[1 : k + 1], inverse[k - 1 :: -1]) / c[0]
    return inverse


def toeplitz_matrix(coefficients: np.ndarray, steps: int) -> np.ndarray:
    """The lower-triangular Toeplitz `steps x steps` matrix with `C[t, s] = c_(t-s)` (zero
    beyond the coefficients given)."""
    c = np.zeros(steps)
    c[: min(steps, len(coefficients))] = np.asarray(coefficients, dtype=float)[:steps]
    lag = np.subtract.outer(np.arange(steps), np.arange(steps))
    return np.where(lag >= 0, c[np.clip(lag, 0, steps - 1)], 0.0)


def separation(participation: Participation) -> int:
    """The fewest steps between two participations of one record (b under cyclic `(k,
    b)`-participation), or the steps when no record participates twice: the most bands a banded
    `C` can have with no two steps of one pattern sharing a row."""
    gaps = [int(np.diff(p).min()) for p in map(sorted, participation.patterns) if len(p) > 1]
    return min(gaps, default=participation.steps)


def band_of(bands: int | None, participation: Participation) -> int:
    """`bands`, or by default the participation's
    [`separation`][dpdl.factorization.toeplitz.separation], checked to be in `[1, T]`."""
    steps = participation.steps
    bands = separation(participation) if bands is None else bands
    if not 1 <= bands <= steps:
        raise ConfigError(f"bands must be in [1, {steps}] for {steps} steps, got {bands}")
    return bands


def sqrt_strategy(participation: Participation) -> Strategy:
    """`C = A^(1/2)` (module doc), with its exact inverse."""
    steps = participation.steps
    return Strategy(
        toeplitz_matrix(sqrt_coefficients(steps), steps),
        toeplitz_matrix(inverse_sqrt_coefficients(steps), steps),
    )


def bsr_encoder(participation: Participation, bands: int | None = None) -> np.ndarray:
    """The banded square root: `sqrt`'s first `bands` coefficients (module doc)."""
    bands = band_of(bands, participation)
    return toeplitz_matrix(sqrt_coefficients(bands), participation.steps)


def bisr_strategy(participation: Participation, bands: int | None = None) -> Strategy:
    """The banded inverse square root: `C^-1` with the first `bands` coefficients of `(1 -
    x)^(1/2)`, `C` its inverse (module doc)."""
    steps = participation.steps
    decoder = inverse_sqrt_coefficients(band_of(bands, participation))
    return Strategy(
        toeplitz_matrix(inverse_series(decoder, steps), steps), toeplitz_matrix(decoder, steps)
    )


def _diagonal_tails(utility: np.ndarray) -> np.ndarray:
    """`K[a, b] = sum_(j <= T-1-max(a, b)) H[j + a, j + b]`: each entry of H summed with those
    after it on its diagonal, so that `tr(H M M^T) = m^T K m` for the lower-triangular Toeplitz
    `M` of coefficients `m`."""
    steps = len(utility)
    tails = np.zeros_like(utility)
    for offset in range(-(steps - 1), steps):
        diagonal = np.diagonal(utility, offset)
        rows = np.arange(len(diagonal)) + max(-offset, 0)
        tails[rows, rows + offset] = np.cumsum(diagonal[::-1])[::-1]
    return tails


class ToeplitzObjective:
    """`s(C) tr(H (C^T C)^-1)` for the lower-triangular Toeplitz `C` of T coefficients `c`, and
    its gradient in them, in `O(T^2)` operations an evaluation (a dense `C` costs `O(T^3)`).

    `s(C) = max_pattern sum_(s, t in pattern) |X_st|`, `X = C^T C`, is eq. (8)'s bound on
    `sens(C)^2`, exact when `X >= 0` on every pattern (a banded `C` with `bands` at most the
    separation, or nonnegative coefficients; MAFALDA-SGD Lemma 12's objective then). With `m` the
    coefficients of `C^-1` (`1 / c(x)`), the error is `m^T K m` (`K[a, b]` the sum of H's
    diagonal from `(a, b)` on, `_diagonal_tails`) and `dm = -m^2 dc` as
    power series; `X_st = sum_(i < T - max(s, t)) c_i c_(i + |s - t|)`, prefix sums of the
    lagged products."""

    def __init__(self, utility: np.ndarray, participation: Participation) -> None:
        self.steps = len(utility)
        self.tails = _diagonal_tails(utility)
        self.pairs = []  # per pattern: (lag, T - latest step, weight) of its pairs s <= t
        for pattern in participation.patterns:
            steps = np.sort(np.asarray(pattern))
            first, second = np.triu_indices(len(steps))
            lag = steps[second] - steps[first]
            self.pairs.append((lag, self.steps - steps[second], np.where(lag > 0, 2.0, 1.0)))
        self.lags = np.unique(np.concatenate([pair[0] for pair in self.pairs]))

    def __call__(self, coefficients: np.ndarray) -> tuple[float, np.ndarray]:
        steps = self.steps
        c = np.zeros(steps)
        c[: len(coefficients)] = coefficients[:steps]
        inverse = inverse_series(c, steps)
        pulled = self.tails @ inverse
        error = float(inverse @ pulled)
        squared = np.convolve(inverse, inverse)[:steps]
        error_gradient = -np.convolve(2.0 * pulled[::-1], squared)[:steps][::-1]
        prefix = np.zeros((len(self.lags), steps + 1))  # row l, column L: sum_(i<L) c_i c_(i+l)
        for row, lag in enumerate(self.lags):
            prefix[row, 1 : steps - lag + 1] = np.cumsum(c[: steps - lag] * c[lag:])
        rows = [np.searchsorted(self.lags, lag) for lag, _, _ in self.pairs]
        values = [prefix[r, length] for r, (_, length, _) in zip(rows, self.pairs, strict=True)]
        sums = [float(w @ np.abs(v)) for v, (_, _, w) in zip(values, self.pairs, strict=True)]
        worst = int(np.argmax(sums))
        lag, length, weight = self.pairs[worst]
        weights = np.zeros_like(prefix)  # the worst pattern's signs, by lag and length
        np.add.at(weights, (rows[worst], length), weight * np.sign(values[worst]))
        after = np.cumsum(weights[:, ::-1], axis=1)[:, ::-1]  # column x: sum over L >= x
        sensitivity_gradient = np.zeros(steps)
        for row, lag in enumerate(self.lags):
            tail = after[row, 1:]  # S_l(j) = sum_(L > j) W_l[L]
            sensitivity_gradient[: steps - lag] += c[lag:] * tail[: steps - lag]
            sensitivity_gradient[lag:] += c[: steps - lag] * tail[: steps - lag]
        loss = sums[worst] * error
        return loss, sums[worst] * error_gradient + error * sensitivity_gradient


def toeplitz_loss(
    coefficients: np.ndarray, utility: np.ndarray, participation: Participation
) -> tuple[float, np.ndarray]:
    """[`ToeplitzObjective`][dpdl.factorization.toeplitz.ToeplitzObjective] of `utility` and
    `participation` at `coefficients`: the loss and its gradient."""
    return ToeplitzObjective(utility, participation)(coefficients)


def bandmf_encoder(
    utility: np.ndarray,
    participation: Participation,
    bands: int | None = None,
    max_iterations: int = 500,
) -> np.ndarray:
    """BandMF for the gossip's utility Gram matrix `H`: the banded Toeplitz `C` (`c_0 = 1`)
    whose `bands - 1` other coefficients minimise
    [`ToeplitzObjective`][dpdl.factorization.toeplitz.ToeplitzObjective], by L-BFGS-B from
    `bsr`'s; the
    better of the optimum and `bsr` by the exact loss
    [`local_loss`][dpdl.factorization.mafalda.local_loss], so never worse than `bsr`."""
    steps = participation.steps
    bands = band_of(bands, participation)
    start = sqrt_coefficients(bands)
    if bands == 1:
        return toeplitz_matrix(start, steps)

    toeplitz = ToeplitzObjective(utility, participation)

    def objective(free: np.ndarray) -> tuple[float, np.ndarray]:
        loss, gradient = toeplitz(np.concatenate([[1.0], free]))
        return loss, gradient[1:bands]

    found = minimize(
        objective, start[1:], jac=True, method="L-BFGS-B", options={"maxiter": max_iterations}
    )
    candidates = [toeplitz_matrix(start, steps)]
    if np.isfinite(found.x).all():
        candidates.append(toeplitz_matrix(np.concatenate([[1.0], found.x]), steps))
    losses = [local_loss(utility, c, participation) for c in candidates]
    return candidates[int(np.argmin(losses))]
