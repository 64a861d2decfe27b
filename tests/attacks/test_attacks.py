"""The eavesdropper's attacks against the accountant: membership lower bounds, the sum attack, the
audit."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

from dpdl.accounting import AgentLevel, account, calibrate
from dpdl.attacks import (
    clopper_pearson_upper,
    gaussian_fit_lower_bound,
    invert_gradient,
    membership_lower_bound,
    sum_attack,
    sum_attack_error,
)
from dpdl.data.idx import load_idx_dataset
from dpdl.errors import ConfigError
from dpdl.experiments.audit import run_audit, write_audit
from dpdl.graphs import erdos_renyi, metropolis_hastings
from dpdl.mechanisms.independent import LocalDP, NoNoise
from dpdl.mechanisms.lppa import NoiseFlow, dp_noise, lppa_noise
from dpdl.mechanisms.registry import build_mechanism
from dpdl.tasks.base import Batch
from dpdl.tasks.torch_model import TorchModelTask
from dpdl.threats import Colluding, Eavesdropper

STEPS, DELTA, CLIP = 50, 1e-5, 0.1


@pytest.fixture(scope="module")
def graph():
    return erdos_renyi(8, 0.5, seed=1)


def test_clopper_pearson_matches_its_closed_form_at_zero_and_all_errors() -> None:
    np.testing.assert_allclose(
        clopper_pearson_upper(0, 1000, 0.05), 1 - 0.05 ** (1 / 1000), rtol=1e-10
    )
    assert clopper_pearson_upper(1000, 1000, 0.05) == 1.0
    assert 0.1 < clopper_pearson_upper(100, 1000, 0.05) < 0.12


@pytest.mark.parametrize("eps", [1.0, 10.0])
@pytest.mark.parametrize("name", ["ldp", "decor", "whisper"])
def test_membership_lower_bound_stays_below_the_accountant_and_has_power(
    graph, name: str, eps: float
) -> None:
    calibration = calibrate(eps, DELTA, STEPS, AgentLevel(CLIP), "exact")
    mechanism = build_mechanism(name, graph, metropolis_hastings(graph), calibration)
    upper = account(mechanism, Eavesdropper(), AgentLevel(CLIP), STEPS, DELTA).epsilon
    lower = membership_lower_bound(
        mechanism, AgentLevel(CLIP).sensitivity, STEPS, DELTA, trials=20_000, seed=2
    )
    assert not lower.noise_free
    assert lower.epsilon <= upper
    if (
        eps == 10.0
    ):  # with 10^4 trials to count errors, the test can show a large epsilon, not a small one
        assert lower.epsilon >= 0.3 * upper


def test_membership_test_exposes_a_mechanism_quieter_than_it_claims(graph) -> None:
    """The attack and the accountant are independent: a mechanism whose sampler draws 10x less
    noise than its covariance says is caught with a lower bound above the accountant's epsilon."""

    class Quiet(LocalDP):
        def sample(self, rng: np.random.Generator, dim: int) -> np.ndarray:
            return 0.1 * super().sample(rng, dim)

    calibration = calibrate(1.0, DELTA, STEPS, AgentLevel(CLIP), "exact")
    honest = build_mechanism("ldp", graph, metropolis_hastings(graph), calibration)
    quiet = Quiet(8, float(np.sqrt(honest.private_variances[0])))
    upper = account(quiet, Eavesdropper(), AgentLevel(CLIP), STEPS, DELTA).epsilon
    assert (
        membership_lower_bound(
            quiet, AgentLevel(CLIP).sensitivity, STEPS, DELTA, trials=5000
        ).epsilon
        > upper
    )


@pytest.mark.parametrize("name", ["ldp", "decor", "whisper"])
@pytest.mark.parametrize("threat", [Eavesdropper(), Colluding(2)], ids=str)
def test_the_gaussian_fit_meets_the_accountant_from_below(graph, name: str, threat) -> None:
    """For Gaussian noise the fitted lower bound stays under the accountant's epsilon (at
    confidence 1 - 1e-4, over three seeds; a bug in either would push it above every time) and
    reaches at least 0.9 of it: the accountant is tight."""
    calibration = calibrate(5.0, DELTA, STEPS, AgentLevel(CLIP), "exact")
    mechanism = build_mechanism(name, graph, metropolis_hastings(graph), calibration)
    upper = account(mechanism, threat, AgentLevel(CLIP), STEPS, DELTA).epsilon
    fits = [
        membership_lower_bound(
            mechanism,
            AgentLevel(CLIP).sensitivity,
            STEPS,
            DELTA,
            5000,
            seed,
            threat=threat,
            fit_alpha=1e-4,
        ).gaussian_fit
        for seed in range(3)
    ]
    assert all(fit <= upper for fit in fits), (fits, upper)
    assert min(fits) >= 0.9 * upper, (fits, upper)


def test_the_gaussian_fit_is_exact_on_one_gaussian_mechanism_and_catches_quiet_noise() -> None:
    """On N(0, s^2) vs N(m, s^2) the fit recovers eps(m / s) from below, to within its confidence
    margin; a sampler 20% quieter than claimed puts the fit above the accountant's epsilon."""
    from dpdl.accounting.gdp import epsilon as gdp_epsilon

    rng = np.random.default_rng(0)
    exact = gdp_epsilon(1.5, DELTA)
    fits = [gaussian_fit_lower_bound(rng.standard_normal(40_000), 1.5, DELTA) for _ in range(5)]
    assert all(0.97 * exact <= fit <= exact for fit in fits), (fits, exact)
    quiet = gaussian_fit_lower_bound(0.8 * rng.standard_normal(40_000), 1.5, DELTA)
    assert quiet > exact


def test_laplace_noise_gets_no_gaussian_fit(graph) -> None:
    lower = membership_lower_bound(dp_noise(8, 0.5), 0.2, 1, DELTA, trials=1000)
    assert lower.gaussian_fit is None
    gaussian = membership_lower_bound(dp_noise(8, 0.5, "gaussian"), 0.2, 1, DELTA, trials=1000)
    assert gaussian.gaussian_fit is not None and gaussian.gaussian_fit > 0


def test_what_a_coalition_cannot_subtract_has_the_accountants_covariance(graph) -> None:
    calibration = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP), "exact")
    for name in ("decor", "whisper", "lppa"):
        mechanism = build_mechanism(name, graph, metropolis_hastings(graph), calibration)
        for coalition in ((), (2,), (0, 5)):
            np.testing.assert_allclose(
                mechanism.unknown_to(coalition).covariance(),
                mechanism.unknown_covariance(coalition),
                atol=1e-12,
            )


def test_a_curious_agent_attacks_through_the_seeds_it_holds(graph) -> None:
    """DECOR against one honest-but-curious agent: the test searches every agent as the attacker,
    subtracts its pairwise secrets, and still stays under the accountant's epsilon."""
    calibration = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP), "exact")
    decor = build_mechanism("decor", graph, metropolis_hastings(graph), calibration)
    upper = account(decor, Colluding(1), AgentLevel(CLIP), STEPS, DELTA).epsilon
    lower = membership_lower_bound(
        decor, AgentLevel(CLIP).sensitivity, STEPS, DELTA, trials=20_000, threat=Colluding(1)
    )
    assert len(lower.coalition) == 1 and lower.agent not in lower.coalition
    assert 0.3 * upper <= lower.epsilon <= upper


def test_singular_noise_is_separated_without_error(graph) -> None:
    calibration = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP), "exact")
    flow = build_mechanism("lppa", graph, metropolis_hastings(graph), calibration)
    for noise in (flow, NoNoise(8), lppa_noise(graph, 0.025, "laplace", every_round=True)):
        result = membership_lower_bound(noise, 0.2, STEPS, DELTA, trials=1000)
        assert result.noise_free and result.epsilon == math.inf
    laplace_dp = membership_lower_bound(
        dp_noise(8, 0.5, "laplace", every_round=True), 0.2, STEPS, DELTA, trials=5000
    )
    assert not laplace_dp.noise_free and 0 < laplace_dp.epsilon < math.inf


def test_membership_test_rejects_a_sampler_that_contradicts_its_covariance(graph) -> None:
    class Leaky(NoiseFlow):
        def sample(self, rng: np.random.Generator, dim: int) -> np.ndarray:
            return super().sample(rng, dim) + 0.1 * rng.standard_normal((self.n, dim))

    with pytest.raises(ConfigError, match="noise-free"):
        membership_lower_bound(Leaky(graph, 1.0), 0.2, STEPS, DELTA, trials=1000)
    with pytest.raises(ConfigError, match="at least 100 trials"):
        membership_lower_bound(NoNoise(8), 0.2, STEPS, DELTA, trials=10)


def test_sum_attack_recovers_the_aggregate_exactly_under_zero_sum_noise(graph) -> None:
    rng = np.random.default_rng(0)
    gradients = rng.standard_normal((8, 500))
    messages = gradients + lppa_noise(graph, 1.0, "laplace").sample(rng, 500)
    np.testing.assert_allclose(sum_attack(messages), gradients.sum(axis=0), atol=1e-12)
    assert sum_attack_error(NoiseFlow(graph, 1.0), gradients, rng) < 1e-12
    ldp_error = sum_attack_error(LocalDP(8, 2.0), gradients, rng)
    assert abs(ldp_error - 2.0 * math.sqrt(8)) < 0.15 * 2.0 * math.sqrt(8)


def test_audit_puts_lppa_at_infinity_and_every_lower_bound_under_its_upper_bound(
    graph, tmp_path: Path
) -> None:
    weights = metropolis_hastings(graph)
    reports = run_audit(
        graph, weights, 10.0, DELTA, STEPS, CLIP, attack_trials=2000, progress=False
    )
    by_name = {report.method: report for report in reports}
    assert {"none", "ldp", "decor", "whisper", "zero-sum", "lppa"} <= set(by_name)
    for name in ("none", "zero-sum", "lppa"):
        assert by_name[name].epsilon["eavesdropper"] == math.inf
        assert by_name[name].epsilon_lower_bound["eavesdropper"] == math.inf
    assert by_name["lppa"].attack["laplace_eavesdropper_lower_bound"] == math.inf
    checked = 0
    for report in reports:
        assert set(report.epsilon_lower_bound) == set(report.epsilon)
        for threat, upper in report.epsilon.items():
            if math.isfinite(upper):
                assert report.epsilon_lower_bound[threat] <= upper, (report.method, threat)
                checked += 1
    assert checked >= 12
    # CDP's noise hides one agent in the average, not in its own messages
    assert (
        by_name["cdp"].epsilon_lower_bound["eavesdropper"]
        > by_name["cdp"].epsilon_lower_bound["central"]
    )
    write_audit(reports, tmp_path)
    assert (
        "Lower bound above upper bound (a bug in one of them): none."
        in (tmp_path / "REPORT.md").read_text()
    )
    rows = json.loads((tmp_path / "audit.json").read_text())
    assert rows[-1]["method"] == "lppa" and rows[-1]["attack"]["eavesdropper"]["noise_free"] is True


def _digits_task() -> TorchModelTask:
    images, labels = load_idx_dataset("mnist", "train")
    inputs = images[:40].astype(np.float32)[:, None] / 255.0
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.Sigmoid(), nn.Linear(32, 10))
    loss = lambda outputs, targets: functional.cross_entropy(outputs, targets, reduction="none")  # noqa: E731
    return TorchModelTask(
        "digits",
        model,
        loss,
        inputs,
        labels[:40],
        [np.arange(20), np.arange(20, 40)],
        inputs[:4],
        labels[:4],
    )


def test_dlg_recovers_a_digit_from_its_gradient_and_not_from_lppa_noise(graph) -> None:
    task = _digits_task()
    params = task.initial_params()
    gradient = task.gradients(
        params.repeat(2, 1), Batch(np.array([[3], [23]]), np.ones((2, 1))).to(task.device), None
    )[0].numpy()
    truth = task.inputs[3:4].numpy()
    params = params.numpy()
    exact = invert_gradient(task, params, gradient, truth, 10, iterations=200)
    assert exact.mse < 1e-4 and exact.labels[0] == int(task.targets[3])
    noise = lppa_noise(graph, 0.025).unknown_to([1]).sample(np.random.default_rng(0), task.dim)[0]
    noisy = invert_gradient(task, params, gradient + noise, truth, 10, iterations=200)
    assert noisy.mse > 100 * exact.mse and noisy.mse > 0.01
    with pytest.raises(ConfigError, match="model's dimension"):
        invert_gradient(task, params[:-1], gradient[:-1], truth, 10)
