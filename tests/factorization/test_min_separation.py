"""Sensitivity under b-min-separated participation (`dpdl.factorization.min_separation`): the
Toeplitz closed form only where its assumptions hold, exact enumeration or a certified upper bound
elsewhere, each checked against brute force over every pattern."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from scipy.linalg import toeplitz
from scipy.special import comb

from dpdl.errors import ConfigError
from dpdl.factorization import LDP, Participation, agent_sensitivities, attacker_knowledge, mf_dsgd
from dpdl.factorization import min_separation as module
from dpdl.factorization.algorithms import local_encoder
from dpdl.factorization.generalized_sensitivity import pattern_sensitivity
from dpdl.factorization.mafalda import local_sensitivity, optimize_local
from dpdl.factorization.min_separation import (
    MinSeparated,
    min_separated_sensitivity,
    pattern_count,
    separated_bound_squared,
    toeplitz_coefficients,
    toeplitz_sensitivity_squared,
)
from dpdl.graphs import erdos_renyi, metropolis_hastings


def _patterns(steps: int, k: int, b: int) -> list[tuple[int, ...]]:
    """Every non-empty set of at most k steps of [0, steps), any two at least b apart."""
    return [
        pattern
        for size in range(1, k + 1)
        for pattern in itertools.combinations(range(steps), size)
        if all(later - earlier >= b for earlier, later in itertools.pairwise(pattern))
    ]


def _brute_force(gram: np.ndarray, k: int, b: int) -> float:
    """The largest exact squared sensitivity over every pattern, none skipped."""
    return max(pattern_sensitivity(gram[np.ix_(p, p)], "exact") for p in _patterns(len(gram), k, b))


def _encoder(coefficients) -> np.ndarray:
    return np.tril(toeplitz(np.asarray(coefficients, dtype=float)))


def _formula(coefficients, k: int, b: int) -> float:
    """The Toeplitz closed form evaluated without its checks: the pattern {0, b, 2b, ...}."""
    encoder = _encoder(coefficients)
    steps = len(encoder)
    column = encoder[:, [j * b for j in range(min(k, math.ceil(steps / b)))]].sum(axis=1)
    return float(column @ column)


def _sqrt_coefficients(steps: int) -> np.ndarray:
    """The square-root factorization's coefficients binom(2i, i) / 4^i (Fichtenberger et al.)."""
    return np.array([comb(2 * i, i, exact=True) / 4**i for i in range(steps)])


VALID = {
    "sqrt": _sqrt_coefficients(12),
    "banded": np.array([1.0, 0.6, 0.3] + [0.0] * 9),
    "geometric": 0.8 ** np.arange(12),
    "prefix-sum": np.ones(12),  # AntiPGD's encoder
    "identity": np.eye(12)[0],  # DP-D-SGD's
}
SHAPES = [(12, 3, 2), (12, 2, 5), (12, 4, 3), (11, 3, 4), (12, 12, 1), (9, 2, 1)]


@pytest.mark.parametrize("name", sorted(VALID))
@pytest.mark.parametrize(("steps", "k", "b"), SHAPES)
def test_closed_form_equals_brute_force_on_valid_coefficients(
    name: str, steps: int, k: int, b: int
) -> None:
    """Nonnegative, non-increasing Toeplitz coefficients: the closed form is the maximum over every
    b-min-separated pattern (Kalinin and Lampert 2024, Theorem 2), and is what dpdl uses."""
    coefficients = VALID[name][:steps]
    encoder = _encoder(coefficients)
    truth = _brute_force(encoder.T @ encoder, k, b)
    assert toeplitz_sensitivity_squared(coefficients, k, b) == pytest.approx(truth, rel=1e-12)
    found = min_separated_sensitivity(encoder, MinSeparated(steps, k, b), pattern_sensitivity)
    assert found.method == "closed form" and found.exact
    assert found.squared == pytest.approx(truth, rel=1e-12)
    np.testing.assert_allclose(toeplitz_coefficients(encoder), coefficients)


@pytest.mark.parametrize(
    ("coefficients", "k", "b", "formula", "truth"),
    [
        ([1, 0, 0, 1, 0, 0, 0, 0], 2, 2, 4.0, 6.0),  # a gap: steps 0 and 3 add up
        ([1, 0.5, 0.25, 0.5, 1, 1.5], 2, 2, 9.375, 9.5625),  # an increasing tail
        ([1, -0.8, 0.5, -0.3, 0.2, -0.1], 2, 1, 1.19, 6.91),  # alternating signs: X < 0, the SDP
        ([1, -0.6, 0.3, -0.2, 0.1, 0, 0], 3, 2, 6.45, 6.45),  # signs change, formula right here
    ],
    ids=["gap", "increasing-tail", "alternating", "sign-change"],
)
def test_closed_form_is_refused_outside_its_assumptions(
    coefficients: list[float], k: int, b: int, formula: float, truth: float
) -> None:
    """Non-monotone or signed coefficients: the Toeplitz formula can fall strictly below the true
    maximum, so dpdl refuses it there and finds the true value by enumeration."""
    encoder = _encoder(coefficients)
    steps = len(coefficients)
    exact = _brute_force(encoder.T @ encoder, k, b)
    assert _formula(coefficients, k, b) == pytest.approx(formula, rel=1e-12)
    assert exact == pytest.approx(truth, rel=1e-6)
    with pytest.raises(ConfigError, match="nonnegative, non-increasing"):
        toeplitz_sensitivity_squared(np.asarray(coefficients, dtype=float), k, b)
    found = min_separated_sensitivity(encoder, MinSeparated(steps, k, b), pattern_sensitivity)
    assert found.method == "exact"
    assert found.squared == pytest.approx(exact, rel=1e-9)
    assert found.squared >= exact * (1 - 1e-12)  # the SDP value is a certified upper bound
    assert local_sensitivity(encoder, MinSeparated(steps, k, b)) == pytest.approx(
        math.sqrt(exact), rel=1e-9
    )


def test_underestimating_examples_really_underestimate() -> None:
    """The first three cases above are strict underestimates (not rounding): at least 1.5%."""
    for coefficients, k, b in [
        ([1, 0, 0, 1, 0, 0, 0, 0], 2, 2),
        ([1, 0.5, 0.25, 0.5, 1, 1.5], 2, 2),
        ([1, -0.8, 0.5, -0.3, 0.2, -0.1], 2, 1),
    ]:
        encoder = _encoder(coefficients)
        assert _formula(coefficients, k, b) < 0.985 * _brute_force(encoder.T @ encoder, k, b)


def test_closed_form_within_tolerance_never_underestimates() -> None:
    """Coefficients that break the assumptions by rounding (1e-12 of the largest) still get the
    closed form, evaluated on their non-increasing majorant: at or above the truth, by at most
    rounding; beyond the tolerance, no closed form."""
    rng = np.random.default_rng(0)
    coefficients = _sqrt_coefficients(10)
    noisy = coefficients + 1e-12 * rng.standard_normal(10)
    noisy[-1] = -1e-12  # slightly negative
    encoder = _encoder(noisy)
    truth = _brute_force(encoder.T @ encoder, 3, 3)
    found = min_separated_sensitivity(encoder, MinSeparated(10, 3, 3), pattern_sensitivity)
    assert found.method == "closed form"
    assert truth <= found.squared <= truth * (1 + 1e-9)
    coefficients[5] = coefficients[4] + 1e-6  # an increase of 1e-6: refused
    assert (
        min_separated_sensitivity(
            _encoder(coefficients), MinSeparated(10, 3, 3), pattern_sensitivity
        )
    ).method == "exact"
    not_toeplitz = _encoder(_sqrt_coefficients(10))
    not_toeplitz[7, 2] *= 1.01
    assert toeplitz_coefficients(not_toeplitz) is None


@pytest.mark.parametrize(("k", "b"), [(2, 2), (3, 3), (4, 1), (6, 2), (5, 5)])
def test_cyclic_closed_form_is_offset_zeros_pattern(k: int, b: int) -> None:
    """T = k b and valid Toeplitz coefficients: cyclic participation's exact sensitivity (every
    offset's pattern scored) is offset 0's, which is also the min-separated closed form."""
    for coefficients in (_sqrt_coefficients(k * b), 0.7 ** np.arange(k * b), np.ones(k * b)):
        encoder = _encoder(coefficients)
        cyclic = local_sensitivity(encoder, Participation.cyclic(k * b, k, b))
        assert cyclic**2 == pytest.approx(toeplitz_sensitivity_squared(coefficients, k, b))
        assert cyclic == pytest.approx(local_sensitivity(encoder, MinSeparated(k * b, k, b)))


@pytest.mark.parametrize("seed", range(6))
def test_upper_bound_is_above_the_exact_value_with_negative_entries(seed: int) -> None:
    """McKenna et al.'s dynamic program on |X| bounds the exact maximum (SDP per pattern) for any
    signs; enumeration finds that maximum (only maximal patterns scored)."""
    rng = np.random.default_rng(seed)
    steps, k, b = 9, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    factor = rng.standard_normal((steps, steps))
    gram = factor.T @ factor
    assert (gram < 0).any()
    exact = _brute_force(gram, k, b)
    participation = MinSeparated(steps, k, b)
    enumerated = min_separated_sensitivity(None, participation, pattern_sensitivity, gram=gram)
    assert enumerated.method == "exact"
    assert enumerated.squared == pytest.approx(exact, rel=1e-9)
    bound = min_separated_sensitivity(None, participation, pattern_sensitivity, gram=gram, limit=0)
    assert bound.method == "upper bound" and not bound.exact
    assert bound.squared >= exact
    assert bound.squared == separated_bound_squared(gram, k, b)


@pytest.mark.parametrize("seed", range(3))
def test_upper_bound_is_tight_where_rows_and_columns_agree(seed: int) -> None:
    """Diagonal X and nonnegative rank-one X = u u^T: the best rows and the best columns are the
    same pattern, so the bound is the exact value."""
    rng = np.random.default_rng(seed)
    steps, k, b = 10, 3, 2
    for gram in (np.diag(rng.random(steps)), np.outer(*(2 * [rng.random(steps)]))):
        assert separated_bound_squared(gram, k, b) == pytest.approx(
            _brute_force(gram, k, b), rel=1e-12
        )


@pytest.mark.parametrize(("steps", "k", "b"), [(10, 3, 2), (7, 7, 1), (12, 2, 5), (5, 9, 3)])
def test_pattern_count_is_the_number_of_patterns(steps: int, k: int, b: int) -> None:
    assert pattern_count(steps, k, b) == len(_patterns(steps, k, b))
    assert MinSeparated(steps, k, b).pattern_count == len(_patterns(steps, k, b))


def test_too_many_patterns_switch_to_the_bound_before_enumerating(monkeypatch) -> None:
    """MAFALDA's T = 380 (k = 20, b = 19): about 4e19 patterns, counted, never listed; the bound
    comes back in bounded time."""
    monkeypatch.setattr(module, "_maximal_patterns", _refuse_to_enumerate)
    participation = MinSeparated(380, 20, 19)
    assert participation.pattern_count > 10**19
    factor = np.random.default_rng(0).standard_normal((380, 380))
    start = time.perf_counter()
    found = min_separated_sensitivity(np.tril(factor), participation, pattern_sensitivity)
    assert time.perf_counter() - start < 10
    assert found.method == "upper bound" and math.isfinite(found.squared)


def _refuse_to_enumerate(steps: int, k: int, b: int):
    raise AssertionError(f"enumerated the patterns of T={steps}, k={k}, b={b}")


def test_every_step_and_cyclic_are_unchanged() -> None:
    """Every step and cyclic participation still score their listed patterns; min-separation
    with k = T, b = 1 is every step (one maximal pattern) and covers the cyclic patterns."""
    rng = np.random.default_rng(1)
    encoder = np.tril(rng.standard_normal((8, 8))) + 3 * np.eye(8)
    gram = encoder.T @ encoder
    every = Participation.every_step(8)
    cyclic = Participation.cyclic(8, 4, 2)
    assert local_sensitivity(encoder, every) == pytest.approx(
        math.sqrt(pattern_sensitivity(gram, "exact"))
    )
    assert local_sensitivity(encoder, cyclic) == pytest.approx(
        math.sqrt(max(pattern_sensitivity(gram[np.ix_(p, p)]) for p in map(list, cyclic.patterns)))
    )
    assert local_sensitivity(encoder, MinSeparated(8, 8, 1)) == pytest.approx(
        local_sensitivity(encoder, every), rel=1e-9
    )
    assert local_sensitivity(encoder, cyclic) <= local_sensitivity(
        encoder, MinSeparated(8, 4, 2)
    ) * (1 + 1e-9)


def test_agent_sensitivities_under_min_separation_match_the_local_encoder() -> None:
    """LDP on MF-D-SGD: B is square and invertible, so every agent's sens(C; B) is sens(C_local),
    under b-min-separation too; exact (enumerated) or bound, as asked."""
    weights = metropolis_hastings(erdos_renyi(5, 0.6, seed=2))
    rng = np.random.default_rng(3)
    local = np.tril(rng.standard_normal((6, 6))) + 3 * np.eye(6)
    knowledge = attacker_knowledge(mf_dsgd(weights, 6, local_encoder(local, 5)), LDP())
    participation = MinSeparated(6, 2, 2)
    for method in ("exact", "bound"):
        np.testing.assert_allclose(
            agent_sensitivities(knowledge, participation, method),
            local_sensitivity(local, participation, method),
            rtol=1e-7,
        )


def test_bad_min_separated_inputs_are_named() -> None:
    with pytest.raises(ConfigError, match="b >= 1"):
        MinSeparated(10, 2, 0)
    with pytest.raises(ConfigError, match="10 x 10"):
        min_separated_sensitivity(np.eye(9), MinSeparated(10, 2, 2), pattern_sensitivity)
    with pytest.raises(ConfigError, match="cyclic participation"):
        optimize_local(np.eye(6), MinSeparated(6, 2, 3))
