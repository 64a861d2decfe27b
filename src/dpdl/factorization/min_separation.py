"""b-min-separated participation and its sensitivity, right for any coefficients.

Under `(k, b)`-participation in the sense of Choquette-Choo et al. (ICML 2023, "Multi-epoch matrix
factorization mechanisms"; jax-privacy's `min_sep`), a record takes part in at most k of the T
steps, any two of them at least b apart, anywhere in `[0, T)`: far more patterns than cyclic
participation's b, too many to list. Its squared sensitivity is the usual maximum over patterns
`pi` (module [`generalized_sensitivity`][dpdl.factorization.generalized_sensitivity]),

    sens^2 = max_pi max_{||d_s|| <= 1} sum_{s, t in pi} X_st <d_s, d_t>,   X = C^T C,

and [`min_separated_sensitivity`][dpdl.factorization.min_separation.min_separated_sensitivity]
computes it in one of three ways, and says which
([`MinSeparatedSensitivity`][dpdl.factorization.min_separation.MinSeparatedSensitivity]):

- `"closed form"`: for a lower-triangular Toeplitz C whose coefficients `c_0, ..., c_{T-1}` are
  nonnegative and non-increasing, the worst pattern is `{0, b, 2b, ...}` (k of them, or as many as
  fit), so `sens^2 = ||sum_j C e_{j b}||^2` (Kalinin and Lampert, NeurIPS 2024, arXiv:2405.13763,
  Theorem 2; jax-privacy's `toeplitz.minsep_sensitivity_squared`, which checks exactly these two
  assumptions, `coef >= 0` and `coef[1:] - coef[:-1] <= 0`). Outside them it underestimates: for
  `c = (1, 0, 1)`, `b = 1`, `k = 2` it gives 3 where the pattern `{0, 2}` gives 5 (the tests show
  such cases). dpdl checks them first, to `TOEPLITZ_TOLERANCE` times the largest entry, and
  evaluates the formula on the smallest non-increasing majorant `c'_i = max_{j >= i} |c_j|` of the
  coefficients: `|C| <= C'` entrywise, so the result is never below the truth (`sum_r (sum_{s in
  pi} |C_rs|)^2` bounds every pattern's value, eq. (8)), and equals it when the coefficients meet
  the assumptions exactly;
- `"exact"`: otherwise, when the number of patterns (counted first, combinatorially: `sum_j
  binom(T - (j-1)(b-1), j)` patterns of j steps) is at most `limit`, every pattern is scored
  ([`pattern_sensitivity`][dpdl.factorization.generalized_sensitivity.pattern_sensitivity]: the
  SDP where X has negative entries). Only patterns that cannot take one more step are scored
  (adding a step never lowers the value, `d_s = 0` being allowed), in decreasing order of their
  eq. (8) bound `sum |X_pi|`, until that bound is no more than the best value found;
- `"upper bound"`: with more patterns, the dynamic program of McKenna et al. (NeurIPS 2023,
  "(Amplified) banded matrix factorization", arXiv:2306.08153, Algorithm 4; jax-privacy's
  `get_min_sep_sensitivity_upper_bound`) on `|X|`: each row's best b-separated selection of at
  most k entries, then the best b-separated selection of at most k rows. It maximises over a
  larger set (rows and columns chosen apart) of eq. (8)'s sums, so it holds for any sign.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from dpdl.errors import ConfigError

__all__ = [
    "PATTERN_LIMIT",
    "TOEPLITZ_TOLERANCE",
    "MinSeparated",
    "MinSeparatedSensitivity",
    "min_separated_sensitivity",
    "pattern_count",
    "separated_bound_squared",
    "toeplitz_coefficients",
    "toeplitz_sensitivity_squared",
]

logger = logging.getLogger(__name__)

#: Most patterns scored one by one; beyond it, the certified upper bound.
PATTERN_LIMIT = 20_000
#: Entries within this fraction of C's largest entry count as equal (Toeplitz, sign, monotonicity).
TOEPLITZ_TOLERANCE = 1e-9

#: A function giving a pattern's squared sensitivity from its Gram block `X_pi`.
Score = Callable[[np.ndarray], float]


def pattern_count(steps: int, k: int, b: int) -> int:
    """How many non-empty sets of at most k steps of `[0, steps)`, any two at least b apart:
    `sum_j binom(steps - (j - 1)(b - 1), j)` (shifting the j-th step back by `(j - 1)(b - 1)`
    maps them one-to-one to plain j-subsets)."""
    return sum(
        math.comb(steps - (j - 1) * (b - 1), j) for j in range(1, min(k, math.ceil(steps / b)) + 1)
    )


@dataclass(frozen=True)
class MinSeparated:
    """b-min-separated `(k, b)`-participation over `steps` steps (Choquette-Choo et al., ICML
    2023): at most k participations, any two at least b steps apart, anywhere."""

    steps: int
    k: int
    b: int

    def __post_init__(self) -> None:
        if self.steps < 1 or self.k < 1 or self.b < 1:
            raise ConfigError(
                "b-min-separated participation needs steps >= 1, k >= 1 and b >= 1, got "
                f"steps={self.steps}, k={self.k}, b={self.b}"
            )

    @property
    def name(self) -> str:
        return f"b-min-separated (k={self.k}, b={self.b})"

    @property
    def max_participations(self) -> int:
        """k, or as many steps b apart as fit in `[0, steps)`."""
        return min(self.k, math.ceil(self.steps / self.b))

    @property
    def pattern_count(self) -> int:
        return pattern_count(self.steps, self.k, self.b)


@dataclass(frozen=True)
class MinSeparatedSensitivity:
    """A squared sensitivity and how it was found: `"closed form"` or `"exact"` (the value
    itself), or `"upper bound"` (certified, possibly above it)."""

    squared: float
    method: str

    @property
    def exact(self) -> bool:
        return self.method != "upper bound"


def toeplitz_coefficients(encoder: np.ndarray) -> np.ndarray | None:
    """The coefficients `c_i = C[t + i, t]` of a lower-triangular Toeplitz `encoder`, or None when
    it is not one (any entry above the diagonal, or a diagonal whose entries differ by more than
    `TOEPLITZ_TOLERANCE` times the largest entry)."""
    if np.triu(encoder, 1).any():
        return None
    steps = len(encoder)
    scale = float(np.abs(encoder).max(initial=0.0))
    diagonals = [np.diagonal(encoder, -i) for i in range(steps)]
    if any(d.max() - d.min() > TOEPLITZ_TOLERANCE * scale for d in diagonals):
        return None
    return np.array([d[np.argmax(np.abs(d))] for d in diagonals])


def _closed_form_violation(coefficients: np.ndarray) -> str | None:
    """Why the Toeplitz closed form does not hold for `coefficients`, or None when it does."""
    scale = float(np.abs(coefficients).max(initial=0.0))
    tolerance = TOEPLITZ_TOLERANCE * scale
    if scale == 0.0:
        return "the coefficients are all zero"
    if coefficients.min() < -tolerance:
        index = int(np.argmin(coefficients))
        return f"coefficient {index} is negative ({coefficients[index]:.6g})"
    increase = np.diff(coefficients)
    if len(increase) and increase.max() > tolerance:
        index = int(np.argmax(increase))
        return (
            f"the coefficients increase from step {index} to {index + 1} by {increase[index]:.6g}"
        )
    return None


def toeplitz_sensitivity_squared(coefficients: np.ndarray, k: int, b: int) -> float:
    """`sens^2` of the lower-triangular Toeplitz C with `coefficients` under b-min-separated
    `(k, b)`-participation: `||sum_{j < m} C e_{j b}||^2`, `m = min(k, ceil(T / b))` (Kalinin and
    Lampert 2024, Theorem 2). Refused (`ConfigError`) unless the coefficients are nonnegative and
    non-increasing to `TOEPLITZ_TOLERANCE` times the largest; evaluated on their smallest
    non-increasing majorant, so never below the truth (module doc)."""
    coefficients = np.asarray(coefficients, dtype=float)
    reason = _closed_form_violation(coefficients)
    if reason is not None:
        raise ConfigError(
            f"the Toeplitz min-separation formula needs nonnegative, non-increasing "
            f"coefficients: {reason}"
        )
    majorant = np.maximum.accumulate(np.abs(coefficients)[::-1])[::-1]
    steps = len(majorant)
    column_sum = np.zeros(steps)
    for start in range(0, min(k, math.ceil(steps / b)) * b, b):
        column_sum[start:] += majorant[: steps - start]
    return float(column_sum @ column_sum)


def _best_separated_sums(values: np.ndarray, k: int, b: int) -> np.ndarray:
    """For each row of nonnegative `values`, the largest sum of at most k of its entries, any
    two at least b apart (McKenna et al. 2023, Algorithm 3, VecSens)."""
    rows, steps = values.shape
    best = np.zeros((rows, steps + b))  # best[:, i]: the best sum over entries i, i + 1, ...
    for _ in range(min(k, math.ceil(steps / b))):
        best[:, :steps] = values + best[:, b : b + steps]
        best = np.maximum.accumulate(best[:, ::-1], axis=1)[:, ::-1]
    return best[:, 0]


def separated_bound_squared(gram: np.ndarray, k: int, b: int) -> float:
    """A certified upper bound on `sens^2` for the Gram matrix `gram` under b-min-separated
    `(k, b)`-participation, any signs (McKenna et al. 2023, Algorithm 4): `O(T^2 k)`."""
    rows = _best_separated_sums(np.abs(gram), k, b)
    return float(_best_separated_sums(rows[None], k, b)[0])


def _maximal_patterns(steps: int, k: int, b: int) -> Iterator[list[int]]:
    """The b-separated patterns of at most k steps that cannot take one more step."""
    pattern: list[int] = []

    def grow(start: int) -> Iterator[list[int]]:
        if len(pattern) == k or start >= steps:
            gaps = np.diff(pattern)
            if len(pattern) == k or (
                pattern[0] < b and pattern[-1] >= steps - b and (gaps < 2 * b).all()
            ):
                yield pattern
            return
        for step in range(start, steps):
            pattern.append(step)
            yield from grow(step + b)
            pattern.pop()

    yield from grow(0)


def _enumerated_squared(gram: np.ndarray, k: int, b: int, score: Score) -> float:
    """The largest score over the maximal patterns, taken in decreasing order of their eq. (8)
    bound and stopped once that bound is no more than the best score found."""
    patterns = [list(pattern) for pattern in _maximal_patterns(len(gram), k, b)]
    bounds = np.array([np.abs(gram[np.ix_(p, p)]).sum() for p in patterns])
    best = 0.0
    for index in np.argsort(-bounds, kind="stable"):
        if bounds[index] <= best:
            break
        best = max(best, score(gram[np.ix_(patterns[index], patterns[index])]))
    return best


def min_separated_sensitivity(
    encoder: np.ndarray | None,
    participation: MinSeparated,
    score: Score,
    gram: np.ndarray | None = None,
    limit: int = PATTERN_LIMIT,
) -> MinSeparatedSensitivity:
    """`sens^2` of `encoder` (or of the Gram matrix `gram` alone, `X = C^T C`, when no encoder is
    given) under `participation`: the Toeplitz closed form where its assumptions hold, else every
    pattern scored by `score` when at most `limit` exist, else the certified upper bound (module
    doc)."""
    steps, k, b = participation.steps, participation.k, participation.b
    if encoder is not None:
        if encoder.shape != (steps, steps):
            raise ConfigError(f"the encoder must be {steps} x {steps}, got {encoder.shape}")
        coefficients = toeplitz_coefficients(encoder)
        reason = "not lower-triangular Toeplitz" if coefficients is None else None
        if coefficients is not None:
            reason = _closed_form_violation(coefficients)
        if reason is None:
            return MinSeparatedSensitivity(
                toeplitz_sensitivity_squared(coefficients, k, b), "closed form"
            )
        logger.debug("no Toeplitz closed form for min-separation: %s", reason)
        gram = encoder.T @ encoder
    if gram is None or gram.shape != (steps, steps):
        raise ConfigError(f"a {steps} x {steps} encoder or Gram matrix is needed")
    count = participation.pattern_count
    if count <= limit:
        return MinSeparatedSensitivity(_enumerated_squared(gram, k, b, score), "exact")
    logger.info(
        "%s over %d steps has a %d-digit number of patterns (more than %d): the sensitivity "
        "is an upper bound",
        participation.name,
        steps,
        len(str(count)),
        limit,
    )
    return MinSeparatedSensitivity(separated_bound_squared(gram, k, b), "upper bound")
