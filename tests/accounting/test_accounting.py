"""The accountant and calibration, each checked against an independent computation.

Independent references: dp_accounting's analytic Gaussian mechanism, its RDP and PLD accountants,
closed forms for special covariances, and a Monte-Carlo estimate of the privacy-loss distribution.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

from dpdl.accounting import (
    AgentLevel,
    ExampleLevel,
    account,
    calibrate,
    epsilon_from_mu_step,
    gdp,
    noise_scale,
)
from dpdl.accounting.rdp_bound import paper_epsilon, paper_mu_step
from dpdl.accounting.sensitivity import unit_sensitivities
from dpdl.errors import PrivacyParameterError
from dpdl.graphs import erdos_renyi, metropolis_hastings
from dpdl.graphs.spectral import laplacian
from dpdl.mechanisms import LocalDP
from dpdl.mechanisms.registry import build_mechanism
from dpdl.threats import CentralObserver, Eavesdropper

DELTA = 1e-5


def _pld_epsilon_of_gaussian(noise_multiplier: float, steps: int, delta: float) -> float:
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(noise_multiplier), steps
    )
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    return accountant.compose(event).get_epsilon(delta)


def _rdp_epsilon_of_gaussian(noise_multiplier: float, steps: int, delta: float) -> float:
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(noise_multiplier), steps
    )
    return dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(delta)


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 2.0, 5.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_gdp_epsilon_matches_analytic_gaussian(mu: float, delta: float) -> None:
    # dp_accounting's analytic Gaussian mechanism (Balle & Wang 2018), sensitivity 1, std 1/mu.
    reference = dp_accounting.get_epsilon_gaussian(1.0 / mu, delta)
    assert gdp.epsilon(mu, delta) == pytest.approx(reference, rel=1e-6, abs=1e-9)


def test_gdp_delta_is_the_privacy_profile_and_inverses_round_safely() -> None:
    for mu in (0.3, 1.7, 6.0):
        for eps in (0.5, 3.0, 20.0):
            d = gdp.delta(eps, mu)
            assert 0.0 <= d < 1.0
            if d > 1e-300:
                assert gdp.delta(gdp.epsilon(mu, d), mu) <= d
        for target in (1e-3, 1e-7):
            eps = gdp.epsilon(mu, target)
            assert gdp.delta(eps, mu) <= target
            assert gdp.mu_for_budget(eps, target) <= mu * (1 + 1e-9)
    assert gdp.delta(1.0, 0.0) == 0.0
    assert gdp.epsilon(math.inf, 1e-5) == math.inf
    assert gdp.compose([0.3, 0.4]) == pytest.approx(0.5)


@pytest.mark.parametrize("eps", [0.5, 3.0, 10.0, 40.0])
@pytest.mark.parametrize("steps", [1, 100, 5000])
def test_exact_calibration_never_overshoots_and_is_tight(eps: float, steps: int) -> None:
    calibration = calibrate(eps, DELTA, steps, AgentLevel(0.1))
    assert calibration.achieved_epsilon <= eps
    assert calibration.achieved_epsilon >= eps * (1 - 1e-6)
    assert not calibration.overshoots


@pytest.mark.parametrize("eps", [1.0, 3.0, 10.0, 20.0])
def test_exact_calibration_agrees_with_dp_accounting(eps: float) -> None:
    """LDP noise calibrated exactly: dp_accounting's PLD gives the same eps, its RDP a larger
    one."""
    steps, clip = 5000, 0.1
    calibration = calibrate(eps, DELTA, steps, AgentLevel(clip))
    sigma = noise_scale(LocalDP(3, 1.0), Eavesdropper(), calibration)
    multiplier = sigma / (2 * clip)  # noise std over sensitivity 2C
    assert _pld_epsilon_of_gaussian(multiplier, steps, DELTA) == pytest.approx(eps, rel=0.01)
    assert _rdp_epsilon_of_gaussian(multiplier, steps, DELTA) >= eps


def test_ldp_accountant_equals_dp_accounting_for_the_same_gaussian() -> None:
    sigma, clip, steps = 3.0, 0.1, 2000
    report = account(sigma**2 * np.eye(5), Eavesdropper(), AgentLevel(clip), steps, DELTA)
    assert report.epsilon == pytest.approx(
        _pld_epsilon_of_gaussian(sigma / (2 * clip), steps, DELTA), rel=0.01
    )
    assert report.epsilon == pytest.approx(
        dp_accounting.get_epsilon_gaussian(sigma / (2 * clip) / math.sqrt(steps), DELTA), rel=1e-6
    )


def test_paper_closed_form_needs_more_noise_and_overshoots_at_large_eps() -> None:
    """docs/design.md's measured facts: 2.6x / 1.8x / 1.4x less variance; eps=40 gives 41.8."""
    clip, steps = 0.1, 5000
    ratios = {}
    for eps in (3.0, 10.0, 20.0, 40.0):
        exact = calibrate(eps, DELTA, steps, AgentLevel(clip))
        paper = calibrate(eps, DELTA, steps, AgentLevel(clip), method="paper")
        ratios[eps] = (exact.mu_step / paper.mu_step) ** 2  # variance ratio paper / exact
        assert paper.inverse_variance_bound == pytest.approx(
            eps**2 / (16 * clip**2 * steps * math.log(1 / DELTA))
        )
    assert ratios[3.0] == pytest.approx(2.6, abs=0.05)
    assert ratios[10.0] == pytest.approx(1.8, abs=0.05)
    assert ratios[20.0] == pytest.approx(1.4, abs=0.05)
    overshoot = calibrate(40.0, DELTA, steps, AgentLevel(clip), method="paper")
    assert overshoot.overshoots
    assert overshoot.achieved_epsilon == pytest.approx(41.8, abs=0.05)
    for eps in (1.0, 5.0, math.log(1 / DELTA)):
        assert not calibrate(eps, DELTA, steps, AgentLevel(clip), method="paper").overshoots


def test_paper_rdp_bound_is_an_upper_bound_and_consistent_with_its_calibration() -> None:
    for mu_step in (1e-3, 1e-2, 5e-2):
        for steps in (10, 5000):
            assert paper_epsilon(mu_step, steps, DELTA) >= gdp.epsilon(
                math.sqrt(steps) * mu_step, DELTA
            )
    for eps in (
        1.0,
        5.0,
        11.0,
    ):  # eps <= log(1/delta): the bound at the paper's calibration is <= eps
        assert paper_epsilon(paper_mu_step(eps, DELTA, 5000), 5000, DELTA) <= eps


def test_sensitivity_closed_forms() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 6))
    covariance = a @ a.T + 0.5 * np.eye(6)
    np.testing.assert_allclose(
        unit_sensitivities(covariance, np.eye(6)),
        np.sqrt(np.diag(np.linalg.inv(covariance))),
        rtol=1e-9,
    )
    n, sigma = 8, 2.0
    central = unit_sensitivities(sigma**2 * np.eye(n), CentralObserver().view(n))
    np.testing.assert_allclose(central, 1.0 / (sigma * math.sqrt(n)), rtol=1e-12)


def test_singular_covariance_gives_infinite_epsilon() -> None:
    graph = erdos_renyi(10, 0.5, seed=1)
    zero_sum = laplacian(graph)  # pairwise-cancelling noise alone: 1^T v = 0, the sum leaks
    report = account(zero_sum, Eavesdropper(), AgentLevel(0.1), 100, DELTA)
    assert math.isinf(report.epsilon) and math.isinf(report.mu_step)
    assert "no guarantee" in str(report)
    assert math.isinf(account(np.zeros((4, 4)), Eavesdropper(), AgentLevel(0.1), 10, DELTA).epsilon)
    # Adding independent noise makes it invertible again: finite epsilon.
    assert math.isfinite(
        account(zero_sum + 0.1 * np.eye(10), Eavesdropper(), AgentLevel(0.1), 100, DELTA).epsilon
    )


def test_mahalanobis_sensitivity_matches_monte_carlo_privacy_loss() -> None:
    """The privacy loss of a Gaussian view is N(mu^2/2, mu^2): check mu by simulation."""
    rng = np.random.default_rng(42)
    n = 5
    a = rng.standard_normal((n, n))
    covariance = a @ a.T + 0.3 * np.eye(n)
    view = rng.standard_normal((3, n))  # an adversary seeing three linear combinations
    sigma = view @ covariance @ view.T
    mus = unit_sensitivities(covariance, view)
    agent = int(np.argmax(mus))
    shift = view[:, agent]  # unit change of the agent's gradient, seen through the view
    samples = rng.multivariate_normal(np.zeros(3), sigma, size=200_000)
    inverse = np.linalg.inv(sigma)

    def log_density(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
        centred = x - mean
        return -0.5 * np.einsum("mi,ij,mj->m", centred, inverse, centred)

    loss = log_density(samples, np.zeros(3)) - log_density(samples, shift)
    mu = mus[agent]
    assert loss.mean() == pytest.approx(mu**2 / 2, rel=0.03)
    assert loss.var() == pytest.approx(mu**2, rel=0.03)


def test_cdp_baseline_has_variance_ldp_over_n_and_is_private_only_centrally() -> None:
    n, steps, clip = 20, 5000, 0.1
    graph = erdos_renyi(n, 0.5, seed=0)
    weights = metropolis_hastings(graph)
    calibration = calibrate(10.0, DELTA, steps, AgentLevel(clip))
    ldp = build_mechanism("ldp", graph, weights, calibration)
    cdp = build_mechanism("cdp", graph, weights, calibration)
    assert cdp.sigma**2 == pytest.approx(ldp.sigma**2 / n, rel=1e-9)
    # The promise is the mechanism's (the standard deviations its agents sample); its covariance
    # alone, the variances rounded once more, is accounted to within rounding of it.
    central = account(cdp, CentralObserver(), AgentLevel(clip), steps, DELTA)
    eavesdropped = account(cdp, Eavesdropper(), AgentLevel(clip), steps, DELTA)
    assert central.epsilon == pytest.approx(10.0, rel=1e-9) and central.epsilon <= 10.0
    assert eavesdropped.epsilon > 5 * central.epsilon
    assert account(ldp, Eavesdropper(), AgentLevel(clip), steps, DELTA).epsilon <= 10.0
    bare = account(ldp.covariance(), Eavesdropper(), AgentLevel(clip), steps, DELTA)
    assert bare.epsilon == pytest.approx(10.0, rel=1e-12)


def test_example_level_calibration_with_pld_never_overshoots() -> None:
    neighbouring = ExampleLevel(clip=1.0, batch_size=64, sampling_rate=0.01)
    steps = 300
    calibration = calibrate(2.0, DELTA, steps, neighbouring)
    assert calibration.achieved_epsilon <= 2.0
    assert calibration.achieved_epsilon >= 2.0 * 0.99
    # Independent check: dp_accounting's RDP accountant on the same subsampled Gaussian is looser.
    multiplier = 1.0 / calibration.mu_step
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(multiplier)), steps
    )
    assert (
        dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(DELTA)
        >= calibration.achieved_epsilon
    )
    # Subsampling amplifies: the same per-step sensitivity without sampling costs much more.
    assert (
        gdp.epsilon(math.sqrt(steps) * calibration.mu_step, DELTA)
        > 3 * calibration.achieved_epsilon
    )


def test_example_level_paper_calibration_is_the_subsampled_rdp_and_needs_more_noise() -> None:
    neighbouring = ExampleLevel(clip=1.0, batch_size=64, sampling_rate=0.01)
    steps, eps = 300, 2.0
    paper = calibrate(eps, DELTA, steps, neighbouring, method="paper")
    exact = calibrate(eps, DELTA, steps, neighbouring)

    def rdp(mu_step: float) -> float:  # independent: dp_accounting's RDP accountant, built here
        event = dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0 / mu_step)),
            steps,
        )
        return dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(DELTA)

    assert (
        rdp(paper.mu_step) <= eps < rdp(paper.mu_step * 1.01)
    )  # the largest mu_step RDP allows, to 1e-3
    assert (
        paper.mu_step < exact.mu_step
    )  # RDP is looser than the PLD: more noise for the same promise
    assert paper.achieved_epsilon < eps and not paper.overshoots  # its exact (PLD) epsilon
    assert epsilon_from_mu_step(
        paper.mu_step, steps, DELTA, neighbouring, "paper-rdp"
    ) == pytest.approx(rdp(paper.mu_step))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"eps": 0.0, "delta": DELTA, "steps": 10},
        {"eps": -1.0, "delta": DELTA, "steps": 10},
        {"eps": math.inf, "delta": DELTA, "steps": 10},
        {"eps": 1.0, "delta": 0.0, "steps": 10},
        {"eps": 1.0, "delta": 1.0, "steps": 10},
        {"eps": 1.0, "delta": DELTA, "steps": 0},
    ],
)
def test_bad_budgets_are_rejected(kwargs: dict) -> None:
    with pytest.raises(PrivacyParameterError):
        calibrate(neighbouring=AgentLevel(0.1), **kwargs)


def test_bad_clip_is_rejected() -> None:
    for clip in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(PrivacyParameterError):
            AgentLevel(clip)
    with pytest.raises(PrivacyParameterError):
        epsilon_from_mu_step(0.1, 0, DELTA, AgentLevel(0.1))


def test_a_registered_calibration_is_accounted_exactly_and_a_broken_one_refused() -> None:
    """A calibration a plugin registers gives the per-step sensitivity; ``calibrate`` reports the
    exact epsilon of it (here half the exact one's: below the target), and refuses a sensitivity
    that is not a positive finite float, naming the calibration."""
    from dpdl.accounting.calibration import exact_mu_step
    from dpdl.choices import CALIBRATION_REGISTRY
    from dpdl.errors import ConfigError

    CALIBRATION_REGISTRY.add("half", lambda *args: exact_mu_step(*args) / 2, "half the exact")
    CALIBRATION_REGISTRY.add("broken", lambda *args: math.nan, "no number")
    try:
        half = calibrate(3.0, DELTA, 100, AgentLevel(0.1), "half")
        exact = calibrate(3.0, DELTA, 100, AgentLevel(0.1))
        assert half.mu_step == exact.mu_step / 2 and half.method == "half"
        assert half.achieved_epsilon == pytest.approx(
            gdp.epsilon(half.mu_step * 10.0, DELTA), rel=1e-12
        )
        assert half.achieved_epsilon < 3.0 / 2
        with pytest.raises(ConfigError, match="calibration 'broken' gave per-step sensitivity nan"):
            calibrate(3.0, DELTA, 100, AgentLevel(0.1), "broken")
    finally:
        CALIBRATION_REGISTRY.unregister("half")
        CALIBRATION_REGISTRY.unregister("broken")
    with pytest.raises(ConfigError, match="unknown calibration 'half'; known: exact, paper"):
        calibrate(3.0, DELTA, 100, AgentLevel(0.1), "half")
