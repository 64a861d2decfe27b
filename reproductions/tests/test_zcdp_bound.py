"""The Whisper / CorN-DSGD and DECOR authors' calibration (``authors``, registered by the
reproductions' plugin), checked against their released code's formulas, written again here from
their repositories' files, and against dpdl's exact accountant and dp_accounting's."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

from dpdl.accounting import AgentLevel, ExampleLevel, calibrate, gdp
from dpdl.graphs import erdos_renyi, metropolis_hastings
from dpdl.mechanisms.registry import build_mechanism
from dpdl.registry import load_plugins

DELTA = 1e-5


@pytest.fixture(autouse=True)
def _plugins() -> None:
    load_plugins()


@pytest.mark.parametrize("steps", [200, 5000])
def test_authors_calibration_is_their_codes_zcdp_bound_and_stays_below_its_label(
    steps: int,
) -> None:
    """The Whisper / CorN-DSGD code's noise (``diff_privacy.py``: variance
    2 T C^2 / (sqrt(L + eps) - sqrt(L))^2, L = log(1/delta)) is the zCDP bound of Bun and Steinke
    (Prop. 1.3) at sensitivity 2C: rho + 2 sqrt(rho L) = eps exactly. At agent level that is the
    noise on each agent's clipped gradient (dpdl's sensitivity 2C: sigma = 2C / mu_step); at
    example level the noise on the batch's sum, one example's sensitivity C over it (half the
    agent level's mu_step). dpdl's exact accountant finds less than the label, at agent level
    (GDP, a closed form) and at example level (PLD, checked against dp_accounting's)."""
    clip, batch, rate, log_delta = 0.1, 128, 0.128, math.log(1 / DELTA)
    for eps in (1.0, 3.0, 10.0, 40.0):
        variance = 2 * steps * clip**2 / (math.sqrt(log_delta + eps) - math.sqrt(log_delta)) ** 2
        agent = calibrate(eps, DELTA, steps, AgentLevel(clip), method="authors")
        assert (2 * clip / agent.mu_step) ** 2 == pytest.approx(variance, rel=1e-12)
        rho = steps * agent.mu_step**2 / 2  # the Gaussian mechanism's zCDP, per step mu^2 / 2
        assert rho + 2 * math.sqrt(rho * log_delta) == pytest.approx(eps, rel=1e-12)
        assert agent.achieved_epsilon == pytest.approx(
            gdp.epsilon(agent.mu_step * math.sqrt(steps), DELTA), rel=1e-12
        )
        assert agent.achieved_epsilon < eps and not agent.overshoots
        example = calibrate(eps, DELTA, steps, ExampleLevel(clip, batch, rate), method="authors")
        assert example.mu_step == agent.mu_step / 2  # C against the agent level's 2C
        assert example.achieved_epsilon < agent.achieved_epsilon  # subsampling's credit
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            rate, dp_accounting.GaussianDpEvent(1 / example.mu_step)
        ),
        steps,
    )
    reference = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    assert example.achieved_epsilon == pytest.approx(
        reference.compose(event).get_epsilon(DELTA), rel=0.02
    )


def _whisper_compute_dp_bound(epsilon: float, delta: float, norm_clip: float, n_rounds: int):
    """arodio/WhisperDSGD, ``diff_privacy.py``, ``DPNoiseGenerator._compute_dp_bound``, as
    released (written again here from the repository's file)."""
    log_delta = np.log(1 / delta)
    numerator = (np.sqrt(log_delta + epsilon) - np.sqrt(log_delta)) ** 2
    return numerator / (2 * n_rounds * norm_clip**2)


def _decor_reverse_eps(eps: float, num_iter: int, delta: float) -> float:
    """elfirdoussilab1/DECOR, ``utils/dp_account.py``, ``reverse_eps`` (user level)."""
    return (np.sqrt(np.log(1 / delta) + eps) - np.sqrt(np.log(1 / delta))) ** 2 / num_iter


def _decor_user_level_rdp(num_iter: int, eps_iter: float, delta: float) -> float:
    """elfirdoussilab1/DECOR, ``utils/dp_account.py``, ``user_level_rdp``."""
    return num_iter * eps_iter + 2 * np.sqrt(num_iter * eps_iter * np.log(1 / delta))


@pytest.mark.parametrize(
    ("eps", "delta", "steps", "clip"),
    [(3.0, 1e-5, 5000, 0.1), (10.0, 1e-6, 800, 1.0), (40.0, 1e-4, 200, 0.5)],
)
def test_the_authors_calibration_is_their_released_formula_at_agent_level(
    eps: float, delta: float, steps: int, clip: float
) -> None:
    """``--calibration authors`` at agent level draws the noise the released codes draw: LDP's
    ``1 / sigma^2`` is Whisper's ``_compute_dp_bound`` (not a quarter of it), and DECOR's
    single-round RDP ``2 C^2 max_i [Sigma^-1]_ii`` (``rdp_account``) of a DECOR design is its
    ``reverse_eps``, which its ``user_level_rdp`` turns back into the label; at example level the
    noise on the batch mean is the authors' noise on the batch's sum over the batch size."""
    graph = erdos_renyi(8, 0.6, seed=2)
    weights = metropolis_hastings(graph)
    calibration = calibrate(eps, delta, steps, AgentLevel(clip), "authors")
    bound = _whisper_compute_dp_bound(eps, delta, clip, steps)
    ldp = build_mechanism("ldp", graph, weights, calibration)
    assert 1.0 / ldp.sigma**2 == pytest.approx(bound, rel=1e-9) and 1.0 / ldp.sigma**2 <= bound
    decor = build_mechanism("decor", graph, weights, calibration)
    eps_iter = 2 * clip**2 * np.diag(np.linalg.inv(decor.covariance())).max()
    assert eps_iter == pytest.approx(_decor_reverse_eps(eps, steps, delta), rel=1e-9)
    assert _decor_user_level_rdp(steps, eps_iter, delta) == pytest.approx(eps, rel=1e-9)
    assert calibration.achieved_epsilon < eps  # the zCDP conversion is loose; GDP is exact
    batch = 64
    example = calibrate(eps, delta, steps, ExampleLevel(clip, batch, 0.05), "authors")
    on_the_mean = build_mechanism("ldp", graph, weights, example).sigma
    assert on_the_mean * batch == pytest.approx(1.0 / np.sqrt(bound), rel=1e-9)
