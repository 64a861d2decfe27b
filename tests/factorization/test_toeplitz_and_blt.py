"""The Toeplitz strategies of centralized DP training as local encoders of MF-D-SGD: the square
root, BSR, BandMF, BISR and BLT match their definitions, the optimised ones beat their starts and
independent noise on a gossip, and a run calibrated with them meets its budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import binom

from dpdl.accounting import gdp
from dpdl.choices import FACTORIZED_REGISTRY
from dpdl.errors import ConfigError
from dpdl.factorization import encoders
from dpdl.factorization.blt import (
    blt_coefficients,
    blt_strategy,
    decoder_coefficients,
    inverse_buffer,
)
from dpdl.factorization.mafalda import local_loss, local_sensitivity, utility_gram
from dpdl.factorization.participation import Participation
from dpdl.factorization.strategy import as_strategy
from dpdl.factorization.toeplitz import (
    bandmf_encoder,
    bisr_strategy,
    bsr_encoder,
    inverse_series,
    separation,
    sqrt_strategy,
    toeplitz_loss,
    toeplitz_matrix,
)
from dpdl.graphs import build_graph, erdos_renyi, metropolis_hastings, mixing_matrix
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.factorized import strategy_for

STRATEGIES = ("sqrt", "bsr", "bandmf", "bisr", "blt")
PARTICIPATION = Participation.cyclic(24, 3, 8)
WEIGHTS = metropolis_hastings(erdos_renyi(8, 0.5, seed=2))
if hasattr(WEIGHTS, "toarray"):
    WEIGHTS = WEIGHTS.toarray()


def _florentine() -> np.ndarray:
    weights = mixing_matrix(build_graph("florentine"), "metropolis-hastings")
    return weights.toarray() if hasattr(weights, "toarray") else np.asarray(weights)


def test_the_square_root_squares_to_the_prefix_sum() -> None:
    """``sqrt``: ``C C = A`` (all ones on and below the diagonal) to 1e-12, its coefficients
    ``binom(2k, k) / 4^k``, and its exact inverse those of ``(1 - x)^(1/2)``: ``1, -1/2, -1/8,
    -1/16, -5/128``."""
    steps = 40
    strategy = sqrt_strategy(Participation.every_step(steps))
    assert np.abs(strategy.encoder @ strategy.encoder - np.tril(np.ones((steps, steps)))).max() < (
        1e-12
    )
    k = np.arange(steps)
    assert np.allclose(strategy.encoder[:, 0], binom(2 * k, k) / 4.0**k, rtol=1e-13, atol=0)
    assert strategy.decoder is not None
    assert strategy.decoder[:5, 0] == pytest.approx([1, -1 / 2, -1 / 8, -1 / 16, -5 / 128])
    assert np.abs(strategy.encoder @ strategy.decoder - np.eye(steps)).max() < 1e-12


@pytest.mark.parametrize("bands", [1, 3, 8])
def test_bsr_is_the_square_root_truncated_to_its_bands(bands: int) -> None:
    """``bsr``: lower-triangular Toeplitz, the square root's first ``bands`` coefficients, zero
    beyond; by default the cycle's ``b = 8`` bands (the participation's separation)."""
    encoder = bsr_encoder(PARTICIPATION, bands)
    full = sqrt_strategy(PARTICIPATION).encoder
    lag = np.subtract.outer(np.arange(24), np.arange(24))
    assert np.array_equal(encoder[(lag >= 0) & (lag < bands)], full[(lag >= 0) & (lag < bands)])
    assert not encoder[(lag < 0) | (lag >= bands)].any()
    assert separation(PARTICIPATION) == 8
    assert np.array_equal(bsr_encoder(PARTICIPATION), bsr_encoder(PARTICIPATION, 8))


@pytest.mark.parametrize("bands", [1, 2, 5])
def test_bisr_has_the_banded_inverse_square_root_as_its_inverse(bands: int) -> None:
    """``bisr``: ``C^-1`` is banded with the first ``bands`` coefficients of ``(1 - x)^(1/2)``,
    and ``C`` is its dense inverse (to 1e-12), with positive coefficients (from two bands on)."""
    strategy = bisr_strategy(PARTICIPATION, bands)
    assert strategy.decoder is not None
    stated = [1.0, -0.5, -0.125, -0.0625, -5 / 128][:bands]
    expected = toeplitz_matrix(np.array(stated), 24)
    assert np.array_equal(strategy.decoder, expected)
    assert np.abs(strategy.encoder @ strategy.decoder - np.eye(24)).max() < 1e-12
    assert (strategy.encoder >= 0).all()
    assert (strategy.encoder[np.tril_indices(24)] > 0).all() == (bands > 1)  # 1 band: C = I


def test_blt_coefficients_and_its_inverse_recurrence() -> None:
    """A BLT ``(theta, omega)``: the Toeplitz coefficients ``c_0 = 1``, ``c_k = sum_i omega_i
    theta_i^(k-1)`` (summed term by term here), and its inverse's coefficients from the buffer
    recurrence and from the inverse BLT ``(theta', omega')`` equal the dense inverse's first
    column and the power series inverse, to 1e-10."""
    theta, omega = np.array([0.3, 0.8, 0.97]), np.array([0.2, 0.1, 0.05])
    steps = 30
    coefficients = blt_coefficients(theta, omega, steps)
    pairs = list(zip(theta, omega, strict=True))
    by_terms = [1.0] + [sum(w * t ** (k - 1) for t, w in pairs) for k in range(1, steps)]
    assert coefficients == pytest.approx(by_terms, rel=1e-13)
    dense_inverse = np.linalg.inv(toeplitz_matrix(coefficients, steps))[:, 0]
    recurrence = decoder_coefficients(theta, omega, steps)
    assert np.abs(recurrence - dense_inverse).max() < 1e-10
    assert np.abs(inverse_series(coefficients, steps) - dense_inverse).max() < 1e-10
    theta_inverse, omega_inverse = inverse_buffer(theta, omega)
    assert np.isrealobj(theta_inverse) and np.isrealobj(omega_inverse)
    assert np.abs(blt_coefficients(theta_inverse, omega_inverse, steps) - dense_inverse).max() < (
        1e-10
    )


def test_blt_strategy_is_a_blt_with_nonnegative_parameters() -> None:
    """``blt``: the encoder is the Toeplitz matrix of its buffer, with ``theta`` in [0, 1] and
    ``omega >= 0``, and no worse than its start nor independent noise (the identity is a BLT with
    ``omega = 0``)."""
    utility = utility_gram(WEIGHTS, 24)
    strategy = blt_strategy(utility, PARTICIPATION, 3)
    assert strategy.buffer is not None
    theta, omega = strategy.buffer
    assert theta.shape == omega.shape == (3,)
    assert ((theta >= 0) & (theta <= 1)).all() and (omega >= 0).all()
    assert np.array_equal(strategy.encoder, toeplitz_matrix(blt_coefficients(theta, omega, 24), 24))
    identity = local_loss(utility, np.eye(24), PARTICIPATION)
    assert local_loss(utility, strategy.encoder, PARTICIPATION) < identity


def _dense_objective(
    coefficients: np.ndarray, utility: np.ndarray, participation: Participation
) -> tuple[float, np.ndarray]:
    """The Toeplitz objective from dense T x T matrices: `s(C) tr(H (C^T C)^-1)` with the
    gradient `-2 M^T H M M^T` of the error in `C` (`M = C^-1`) and `2 C S` of the worst pattern's
    sum (`S` the signs of `X = C^T C` on it), summed along each diagonal."""
    steps = len(utility)
    encoder = toeplitz_matrix(coefficients, steps)
    decoder = np.linalg.inv(encoder)
    covariance = decoder @ decoder.T
    error = float(np.sum(covariance * utility))
    gram = encoder.T @ encoder
    blocks = [np.ix_(p, p) for p in map(list, participation.patterns)]
    sums = [float(np.abs(gram[block]).sum()) for block in blocks]
    worst = int(np.argmax(sums))
    signs = np.zeros((steps, steps))
    signs[blocks[worst]] = np.sign(gram[blocks[worst]])
    matrix = sums[worst] * (-2.0 * decoder.T @ utility @ covariance) + error * 2 * encoder @ signs
    return sums[worst] * error, np.array([np.trace(matrix, offset=-k) for k in range(steps)])


@pytest.mark.parametrize(
    "participation",
    [PARTICIPATION, Participation.every_step(24), Participation.cyclic(24, 5, 5)],
    ids=["cyclic-3-8", "every-step", "cyclic-5-5"],
)
def test_the_fast_toeplitz_objective_is_the_dense_one(participation: Participation) -> None:
    """`ToeplitzObjective`'s O(T^2) loss and gradient (power series, prefix sums of lagged
    products) equal the dense O(T^3) computation to 1e-10 (relative), for coefficients of mixed
    signs and for banded ones, under cyclic and every-step participation."""
    utility = utility_gram(WEIGHTS, 24)
    rng = np.random.default_rng(7)
    for coefficients in (
        np.concatenate([[1.0], rng.normal(size=23) * 0.3]),
        np.concatenate([[1.0], rng.normal(size=4) * 0.5]),
    ):
        loss, gradient = toeplitz_loss(coefficients, utility, participation)
        dense_loss, dense_gradient = _dense_objective(coefficients, utility, participation)
        assert loss == pytest.approx(dense_loss, rel=1e-10)
        scale = np.abs(dense_gradient).max()
        assert np.abs(gradient[: len(coefficients)] - dense_gradient[: len(coefficients)]).max() < (
            1e-10 * scale
        )


def test_the_toeplitz_objective_gradient_is_the_finite_difference() -> None:
    """``toeplitz_loss``'s analytic gradient against central differences, for coefficients of
    mixed signs (the worst pattern's signs of ``C^T C`` enter); the objective, with eq. (8)'s
    bound for the sensitivity, is at least the exact loss."""
    utility = utility_gram(WEIGHTS, 24)
    coefficients = np.random.default_rng(4).normal(size=24) * 0.3
    coefficients[0] = 1.0
    loss, gradient = toeplitz_loss(coefficients, utility, PARTICIPATION)
    step = 1e-6
    for k in (0, 1, 5, 17):
        shifted = [coefficients.copy(), coefficients.copy()]
        shifted[0][k] += step
        shifted[1][k] -= step
        values = [toeplitz_loss(c, utility, PARTICIPATION)[0] for c in shifted]
        assert gradient[k] == pytest.approx((values[0] - values[1]) / (2 * step), rel=1e-5)
    # eq. (8)'s bound on sens^2: at least the exact loss
    exact = local_loss(utility, toeplitz_matrix(coefficients, 24), PARTICIPATION)
    assert loss >= exact * (1 - 1e-12)


@pytest.mark.parametrize("bands", [2, 4, 8])
def test_bandmf_beats_bsr_and_independent_noise_on_a_gossip(bands: int) -> None:
    """BandMF optimised for the Florentine families' gossip (T = 24, b = 8): a banded Toeplitz
    ``C`` with ``c_0 = 1``, an exact loss at most BSR's at the same bands (its start) and below
    DP-D-SGD's; its sensitivity is the largest pattern's summed squared column norms (no two
    steps of a pattern share a band)."""
    weights = _florentine()
    utility = utility_gram(weights, 24)
    encoder = bandmf_encoder(utility, PARTICIPATION, bands)
    lag = np.subtract.outer(np.arange(24), np.arange(24))
    assert not encoder[(lag < 0) | (lag >= bands)].any() and encoder[0, 0] == 1.0
    assert np.array_equal(encoder, toeplitz_matrix(encoder[:, 0], 24))
    loss = local_loss(utility, encoder, PARTICIPATION)
    assert loss <= local_loss(utility, bsr_encoder(PARTICIPATION, bands), PARTICIPATION)
    assert loss < local_loss(utility, np.eye(24), PARTICIPATION)
    columns = np.sum(encoder**2, axis=0)
    norms = max(columns[list(p)].sum() for p in PARTICIPATION.patterns)
    assert local_sensitivity(encoder, PARTICIPATION) == pytest.approx(math.sqrt(norms), rel=1e-12)


@pytest.mark.parametrize("name", STRATEGIES)
def test_each_strategy_is_registered_and_calibrated(name: str) -> None:
    """Each strategy is a time-correlated mechanism of the registry, its target's encoder lower
    triangular with what its stream needs, and the noise multiplier ``sigma`` calibrated with its
    exact sensitivity gives ``mu = Delta sens / sigma``-GDP whose eps meets the budget and spends
    it (within 1e-9)."""
    from dpdl.factorization.mafalda import noise_multiplier

    assert name in FACTORIZED_REGISTRY
    strategy = as_strategy(FACTORIZED_REGISTRY.get(name)(WEIGHTS, PARTICIPATION))
    assert strategy.encoder.shape == (24, 24) and not np.triu(strategy.encoder, 1).any()
    assert (strategy.buffer is not None) == (name == "blt")
    assert (strategy.decoder is not None) == (name in ("sqrt", "bisr"))
    sensitivity = local_sensitivity(strategy.encoder, PARTICIPATION)
    row, eps, delta = 0.07, 2.0, 1e-6
    sigma = noise_multiplier(strategy.encoder, PARTICIPATION, row, eps, delta)
    achieved = gdp.epsilon(row * sensitivity / sigma, delta)
    assert eps - 1e-9 <= achieved <= eps


def test_options_reach_the_targets_and_the_cache_key() -> None:
    """``bands`` and ``buffer`` are passed to the targets and kept apart in the encoder cache: two
    band counts give two encoders, the default that of the cycle."""
    three = strategy_for("bsr", WEIGHTS, 24, 8, bands=3).encoder
    default = strategy_for("bsr", WEIGHTS, 24, 8).encoder
    assert np.count_nonzero(three[:, 0]) == 3 and np.count_nonzero(default[:, 0]) == 8
    assert strategy_for("blt", WEIGHTS, 24, 8, buffer=2).buffer[0].shape == (2,)
    assert strategy_for("blt", WEIGHTS, 24, 8).buffer[0].shape == (4,)
    assert isinstance(encoders.dp_dsgd(WEIGHTS, PARTICIPATION), np.ndarray)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {"mechanism": "mafalda", "bands": 4},
            r"bands \(--bands\) 4 applies to .*bsr, bandmf, bisr",
        ),
        (
            {"mechanism": "bsr", "buffer": 2},
            r"buffer \(--buffer\) 2 applies to .*blt, not to 'bsr'",
        ),
        ({"mechanism": "ldp", "bands": 2}, r"bands \(--bands\) 2 applies"),
        ({"mechanism": "bandmf", "bands": 30}, r"bands \(--bands\) is 30, more than the 24 steps"),
        ({"mechanism": "blt", "buffer": 0}, "buffer"),
    ],
)
def test_an_option_a_mechanism_does_not_take_is_refused(changes: dict, words: str) -> None:
    """An option given to a mechanism that does not use it, or too large, is one ConfigError
    naming it, before any work."""
    with pytest.raises(ConfigError, match=words):
        TrainConfig(clip_level="example", steps=24, cycle=8, **changes).resolved()
