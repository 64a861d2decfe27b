"""Budgets are promises: no calibration exceeds its target, checked in 60-digit arithmetic.

The independent computation is mpmath's evaluation (``mp.dps = 60``) of the Gaussian-DP privacy
profile ``delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Dong, Roth & Su 2022,
Corollary 2.13), where the float evaluation of :func:`dpdl.accounting.gdp.delta` is off by up to
5e-12 relative (its two terms cancel), and a 60-digit Mahalanobis norm for the covariances that
are (nearly) singular.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

from dpdl.accounting import AgentLevel, ExampleLevel, account, calibrate, gdp, noise_scale
from dpdl.errors import ConfigError
from dpdl.factorization.mafalda import local_sensitivity, noise_multiplier
from dpdl.factorization.participation import Participation
from dpdl.graphs import erdos_renyi, metropolis_hastings
from dpdl.graphs.spectral import laplacian
from dpdl.mechanisms import LocalDP
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.mechanisms.decor import Decor
from dpdl.mechanisms.registry import MECHANISMS, DesignOptions, build_mechanism
from dpdl.threats import CentralObserver, Colluding, Eavesdropper, ThreatModel

mp.mp.dps = 60

#: The budgets: eps log-spaced over 0.05-60, delta log-spaced over 1e-3-1e-10.
EPSILONS = np.geomspace(0.05, 60.0, 30)
DELTAS = np.geomspace(1e-3, 1e-10, 10)
GRID = [(float(e), float(d)) for e in EPSILONS for d in DELTAS]
#: A coarser grid over the same range for the designs (each is a solve).
COARSE = [(float(e), float(d)) for e in np.geomspace(0.05, 60.0, 5) for d in (1e-3, 1e-6, 1e-10)]


def true_delta(eps: float, mu: float) -> mp.mpf:
    """delta(eps; mu) in 60 digits, of the floats ``eps`` and ``mu`` exactly as given."""
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def test_the_float_delta_does_overshoot_without_the_margin() -> None:
    """Why the margin exists: the float delta says "within" where 60 digits say "above"."""
    eps, target = 0.05, 1e-10
    mu = gdp.mu_for_budget(eps, target)
    above = [
        m
        for m in (mu * (1 + k * 1e-13) for k in range(1, 400))
        if gdp.delta(eps, m) <= target < true_delta(eps, m)
    ]
    assert above  # floats the bare bisection on gdp.delta could have returned
    assert not any(gdp.within(eps, m, target) for m in above)


def test_mu_for_budget_and_epsilon_are_safe_and_tight_in_60_digits() -> None:
    """300 budgets: the calibrated mu's true delta is at most the target, and within 1e-9 of the
    largest such mu; ``epsilon`` of it is at least the true eps and within 1e-9 of it. (The round
    trip ``epsilon(mu_for_budget(eps))`` can land 1e-13 above eps, the float delta being monotone
    only up to rounding; :func:`~dpdl.accounting.calibration.calibrate` checks and steps down.)"""
    for eps, target in GRID:
        mu = gdp.mu_for_budget(eps, target)
        assert true_delta(eps, mu) <= target, (eps, target)
        assert true_delta(eps, mu * (1 + 1e-9)) > target, (eps, target)  # the margin is tiny
        reported = gdp.epsilon(
            mu, target
        )  # may exceed eps by 1e-13: the float delta is not monotone
        assert (
            true_delta(reported, mu) <= target
        )  # reported >= the true eps of mu (delta decreases in eps)
        assert true_delta(reported * (1 - 1e-9), mu) > target, (eps, target)


@pytest.mark.parametrize(
    ("eps", "target"), [(1e-4, 1e-15), (1e-3, 1e-12), (300.0, 1e-15), (2.0, 0.5)]
)
def test_budgets_beyond_the_grid_are_safe(eps: float, target: float) -> None:
    """Far out (cancellation of 4e5 at eps = 1e-4, where the float delta errs by 3e-9 relative),
    the rounding bound grows with the error and still holds."""
    mu = gdp.mu_for_budget(eps, target)
    assert true_delta(eps, mu) <= target
    assert true_delta(eps, mu * (1 + 1e-6)) > target
    assert true_delta(gdp.epsilon(mu, target), mu) <= target


@pytest.mark.parametrize("mu", [200.0, 1e20])
def test_epsilon_of_a_huge_mu_is_safe_not_an_overflow(mu: float) -> None:
    """mu = 1e20 (what a covariance of pure rounding noise used to give the central observer)
    overflowed ``e^eps``; its eps is about mu^2 / 2, safe in 60 digits. Beyond mu^2 = 1.8e308 no
    float eps is certain: inf."""
    reported = gdp.epsilon(mu, 1e-5)
    assert mu * mu / 2 <= reported < math.inf
    assert true_delta(reported, mu) <= 1e-5
    assert gdp.epsilon(1e160, 1e-5) == math.inf


# -- every design of the registry ------------------------------------------------------------------

GRAPH = erdos_renyi(8, 0.5, 0)
WEIGHTS = metropolis_hastings(GRAPH)
STEPS, CLIP = 100, 0.5
DESIGNS = {
    "ldp": DesignOptions(),
    "cdp": DesignOptions(),
    "decor": DesignOptions(),
    "decor-appendix-d": DesignOptions(decor_search="appendix-d"),
    "decor-honest-but-curious": DesignOptions(threat="honest-but-curious"),
    "whisper": DesignOptions(),
    "whisper-multiseed": DesignOptions(groups=2, q=1),
    "zero-sum": DesignOptions(),
    "lppa": DesignOptions(),
}


def test_every_registered_mechanism_is_checked() -> None:
    assert {name.split("-appendix")[0].split("-honest")[0] for name in DESIGNS} == set(MECHANISMS)


@pytest.mark.parametrize("design", DESIGNS)
def test_registry_designs_never_exceed_the_budget(design: str) -> None:
    """Over 15 budgets: the accountant's eps against the threat a design is calibrated for is at
    most the target, and the composed ``mu = sqrt(T) mu_step`` meets delta in 60 digits. Designs
    with no calibration of their own (zero-sum, LPPA) promise nothing and say so: eps = inf."""
    name = design.split("-appendix")[0].split("-honest")[0]
    for eps, target in COARSE:
        calibration = calibrate(eps, target, STEPS, AgentLevel(CLIP))
        assert calibration.achieved_epsilon <= eps
        mechanism = build_mechanism(name, GRAPH, WEIGHTS, calibration, DESIGNS[design])
        report = account(mechanism, mechanism.default_threat, AgentLevel(CLIP), STEPS, target)
        if not mechanism.calibrated:
            assert math.isinf(report.epsilon)
            continue
        assert report.epsilon <= eps, (design, eps, target)
        assert report.epsilon >= eps * (1 - 1e-6)  # and calibrated, not merely safe
        assert true_delta(eps, mp.sqrt(STEPS) * mp.mpf(report.mu_step)) <= target, (
            design,
            eps,
            target,
        )


@pytest.mark.parametrize(
    "encoder", [np.eye(20), np.tril(np.ones((20, 20)))], ids=["dp-dsgd", "antipgd"]
)
def test_factorization_noise_multiplier_never_exceeds_the_budget(encoder: np.ndarray) -> None:
    """MAFALDA-SGD's sigma (Theorem 8): ``mu = Delta sens / sigma`` meets every budget of the grid
    in 60 digits, and the accountant's eps of it is at most the target."""
    participation = Participation.cyclic(20, 5, 4)
    sensitivity = local_sensitivity(encoder, participation)
    for eps, target in GRID[::3]:
        sigma = noise_multiplier(encoder, participation, 0.3, eps, target)
        mu = 0.3 * sensitivity / sigma
        assert gdp.epsilon(mu, target) <= eps
        assert true_delta(eps, mp.mpf(0.3) * mp.mpf(sensitivity) / mp.mpf(sigma)) <= target


@pytest.mark.parametrize(("eps", "target"), [(0.5, 1e-5), (2.0, 1e-7), (8.0, 1e-9)])
def test_example_level_pld_calibration_never_exceeds_the_budget(eps: float, target: float) -> None:
    """Example level (PLD, dp_accounting's pessimistic discretisation): the calibration and the LDP
    design built on it report at most the target."""
    relation = ExampleLevel(CLIP, 16, 0.05)
    calibration = calibrate(eps, target, 50, relation)
    assert calibration.achieved_epsilon <= eps
    mechanism = LocalDP(4, noise_scale(LocalDP(4, 1.0), Eavesdropper(), calibration))
    assert account(mechanism, Eavesdropper(), relation, 50, target).epsilon <= eps


# -- singular and nearly singular covariances ------------------------------------------------------

SMALL = erdos_renyi(8, 0.5, 1)
THREATS: list[ThreatModel] = [Eavesdropper(), CentralObserver(), Colluding(1), Colluding(3)]


def exact_worst_sensitivity(mechanism: NoiseMechanism, threat: ThreatModel) -> mp.mpf:
    """``max_i sqrt(e_i^T P^T (P R_H P^T)^-1 P e_i)`` over coalitions and honest agents in 60
    digits."""
    worst = mp.mpf(0)
    for coalition in threat.coalitions(mechanism.n):
        honest = [i for i in range(mechanism.n) if i not in coalition]
        unknown = mp.matrix(
            mechanism.unknown_covariance(coalition)[np.ix_(honest, honest)].tolist()
        )
        view = mp.matrix(threat.view(len(honest)).tolist())
        inverse = (view * unknown * view.T) ** -1
        for i in range(len(honest)):
            column = view[:, i]
            worst = max(worst, mp.sqrt((column.T * inverse * column)[0]))
    return worst


@pytest.mark.parametrize("scale", [1e-30, 1.0, 1e30])
@pytest.mark.parametrize("threat", THREATS, ids=str)
def test_an_unprotected_direction_is_infinite_for_every_threat_at_every_scale(
    threat: ThreatModel, scale: float
) -> None:
    """Pairwise-cancelling noise alone (``R = sigma^2 L``, zero noise along the sum of the honest
    agents' gradients): eps = inf for every view and coalition, whatever the noise scale (the
    central observer's 1 x 1 ``1^T R 1 / n^2`` is rounding noise, once read as a huge finite mu)."""
    report = account(Decor(SMALL, 0.0, math.sqrt(scale)), threat, AgentLevel(CLIP), STEPS, 1e-5)
    assert math.isinf(report.mu_step) and math.isinf(report.epsilon)
    if threat.coalition_count(SMALL.number_of_nodes()) == 1:  # the same, from the bare covariance
        assert math.isinf(
            account(scale * laplacian(SMALL), threat, AgentLevel(CLIP), STEPS, 1e-5).epsilon
        )


@pytest.mark.parametrize("relative", [1e-6, 1e-8])
@pytest.mark.parametrize("threat", THREATS, ids=str)
def test_a_tiny_genuine_private_variance_keeps_an_accurate_finite_value(
    threat: ThreatModel, relative: float
) -> None:
    """The same noise plus private variance ``relative`` times the largest pairwise variance:
    finite, at every scale, and equal to the 60-digit Mahalanobis norm (the condition number is
    1/relative, so double precision keeps about 16 + log10(relative) digits)."""
    lam = float(np.linalg.eigvalsh(laplacian(SMALL)).max())
    reference = None
    for scale in (1e-30, 1.0, 1e30):
        mechanism = Decor(SMALL, math.sqrt(relative * lam * scale), math.sqrt(scale))
        report = account(mechanism, threat, AgentLevel(1.0), 1, 1e-5)
        exact = exact_worst_sensitivity(mechanism, threat) * 2  # agent-level sensitivity 2C
        assert report.mu_step == pytest.approx(float(exact), rel=1e3 * relative**-1 * 2.0**-52)
        reference = reference or report.mu_step * math.sqrt(scale)
        assert report.mu_step * math.sqrt(scale) == pytest.approx(reference, rel=1e-6)


def test_zero_noise_on_one_agent_is_infinite_where_its_message_is_seen() -> None:
    """Agent 0 adds no noise: infinite against every view that sees its message, but the average
    (central observer) is hidden by the others' noise: unit mu = 1 / sqrt(sum of variances)."""
    variances = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    mechanism = NoiseMechanism(6, variances)
    for threat in (Eavesdropper(), Colluding(1), Colluding(2)):
        assert math.isinf(account(mechanism, threat, AgentLevel(0.5), STEPS, 1e-5).epsilon)
    central = account(mechanism, CentralObserver(), AgentLevel(0.5), STEPS, 1e-5)
    assert central.mu_step == pytest.approx(2 * 0.5 / math.sqrt(variances.sum()), rel=1e-12)
    mechanism = NoiseMechanism(6, variances + 1e-6 * variances.max())  # a genuine private variance
    report = account(mechanism, Eavesdropper(), AgentLevel(0.5), STEPS, 1e-5)
    assert report.mu_step == pytest.approx(2 * 0.5 / math.sqrt(5e-6), rel=1e-12)


def test_several_seeds_released_together_state_their_composed_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dpdl train --seed 0 1 2 --save-models`` releases three models of the same data, each
    (eps = 1)-DP: the folder and the command state what releasing them together costs, the
    Gaussian-DP composition of all their steps, checked here in 60 digits (delta at that eps is
    the target, to the accountant's rounding margin, and above it a hair lower)."""
    from dpdl.cli import main

    folder = tmp_path / "run"
    options = ["--task", "least-squares", "--graph", "ring", "--n", "4", "--mechanism", "ldp"]
    options += ["--eps", "1", "--steps", "20", "--seed", "0", "1", "2", "--save-models"]
    assert main(["train", *options, "--no-progress", "--out", str(folder)]) == 0
    err = capsys.readouterr().err
    final = json.loads((folder / "final.json").read_text())
    alone, together = final["privacy"][0], final["privacy_seeds_together"][0]
    assert alone["epsilon"] <= 1.0 and together["steps"] == 60
    assert together["threat"] == alone["threat"] and together["epsilon"] > 1.8
    total = math.sqrt(60) * together["mu_step"]
    assert true_delta(together["epsilon"], total) <= mp.mpf(1e-5)
    assert true_delta(together["epsilon"] * (1 - 1e-9), total) > mp.mpf(1e-5)
    assert f"eps={together['epsilon']:.4g}" in err
    assert "3 seeds' results released together" in err
    assert sorted(p.parent.name for p in folder.glob("models/seed*/manifest.json")) == [
        f"seed{k}" for k in range(3)
    ]


def test_runs_composed_at_example_level_are_bounded_by_all_their_steps_at_the_worst() -> None:
    """Two runs of different noise at example level: the composed report takes all 200 steps at
    the larger per-step sensitivity, an upper bound on dp_accounting's PLD of the two runs'
    events composed as they are (an independent computation), and above either run alone."""
    import dp_accounting

    from dpdl.accounting.accountant import compose_runs

    relation = ExampleLevel(1.0, 16, 0.05)
    reports = [
        account(LocalDP(4, sigma), Eavesdropper(), relation, 100, 1e-5) for sigma in (0.05, 0.06)
    ]
    together = compose_runs(reports, relation)
    assert together.steps == 200 and together.mu_step == max(r.mu_step for r in reports)
    events = [
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(1 / r.mu_step)),
            100,
        )
        for r in reports
    ]
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    exact = accountant.compose(dp_accounting.ComposedDpEvent(events)).get_epsilon(1e-5)
    assert max(r.epsilon for r in reports) < exact <= together.epsilon * (1 + 1e-3)
    with pytest.raises(ConfigError, match="accounted alike"):
        compose_runs([reports[0], account(LocalDP(4, 0.05), Colluding(1), relation, 100, 1e-5)])
