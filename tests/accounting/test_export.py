"""The export of a view's privacy loss (`dpdl.accounting.export`): dp_accounting composes the
exported events as dpdl does, the exported PLD is pessimistic and matches dpdl's epsilon, the f-DP
curve is Dong, Roth & Su's `G_mu`, and the per-coordinate pitfall of google/differential-privacy
PR #430 underestimates where dpdl's whitened export does not."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import dp_accounting
import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

from dpdl.accounting import (
    AgentLevel,
    ExampleLevel,
    GaussianNoise,
    PrivacyReport,
    SharedSecret,
    TradeOffCurve,
    View,
    account,
    dp_event,
    gaussian_view,
    gdp,
    pair_view,
    privacy_loss_distribution,
    tradeoff,
    view_of,
    whitened_sensitivity,
)
from dpdl.accounting.accountant import compose_runs
from dpdl.accounting.export import WHOLE_RUN_ACCOUNTANTS, export_json
from dpdl.errors import ConfigError, PrivacyParameterError
from dpdl.threats import Colluding, Eavesdropper

ROOT = Path(__file__).resolve().parents[2]
DELTA = 1e-5
STEPS = 400
#: dp_accounting's PLD error here: a pessimistic discretisation at 1e-4 adds at most this to eps.
PLD_TOLERANCE = 1e-3


def _pld_accountant() -> dp_accounting.pld.PLDAccountant:
    return dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)


@pytest.fixture(scope="module")
def ring_noise() -> GaussianNoise:
    """DECOR-like noise on a ring of 6: private variance 1, each edge's pair a cancelling secret
    of standard deviation 3 (strongly anti-correlated neighbours)."""
    n = 6
    secrets = [
        SharedSecret((i, (i + 1) % n), np.array([[3.0], [-3.0]])) for i in range(n)
    ]  # fmt: skip
    return GaussianNoise(n, np.ones(n), tuple(secrets))


@pytest.fixture(scope="module")
def reports(ring_noise: GaussianNoise) -> list[PrivacyReport]:
    relation = AgentLevel(0.05)
    return [
        account(ring_noise, threat, relation, STEPS, DELTA)
        for threat in (Eavesdropper(), Colluding(1), Colluding(2))
    ]


def test_an_exported_view_composes_with_other_events_as_dpdl_composes(reports) -> None:
    """(a) A curious agent's view composed by dp_accounting's PLD accountant with a Gaussian of
    noise multiplier 2 gives dpdl's GDP composition `sqrt(mu^2 + 1/4)`, within the PLD's
    discretisation (measured: 5e-9 above); its RDP accountant, an upper bound, no less."""
    view = view_of(reports, "honest-but-curious")
    assert view.rounds == STEPS and view.mu_step == reports[1].mu_step
    accountant = _pld_accountant()
    accountant.compose(dp_event(view))
    accountant.compose(dp_accounting.GaussianDpEvent(2.0))
    composed = accountant.get_epsilon(DELTA)
    expected = gdp.epsilon(gdp.compose([view.mu, 0.5]), DELTA)
    assert expected - 1e-9 <= composed <= expected + PLD_TOLERANCE
    assert composed > reports[1].epsilon + 0.1  # the other event costs something
    replace = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    replace.compose(dp_event(view))  # the relation the docs warn against: it doubles the shift
    assert replace.get_epsilon(DELTA) == pytest.approx(gdp.epsilon(2 * view.mu, DELTA), abs=1e-3)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(dp_event(view))
    rdp.compose(dp_accounting.GaussianDpEvent(2.0))
    assert rdp.get_epsilon(DELTA) >= expected - 1e-9


def test_an_exported_subsampled_view_composes_with_a_poisson_event_as_dpdl_composes(
    ring_noise,
) -> None:
    """(a) An example-level view (T1 Poisson-subsampled rounds) composed with T2 more rounds of
    the same `PoissonSampledDpEvent` is what dpdl's composition of the two runs reports
    ([`compose_runs`][dpdl.accounting.accountant.compose_runs], T1 + T2 steps of the same
    mechanism) to within the discretisation."""
    relation = ExampleLevel(4.0, 4, 0.05)
    first = account(ring_noise, Eavesdropper(), relation, 150, DELTA)
    second = account(ring_noise, Eavesdropper(), relation, 250, DELTA)
    view = view_of(first)
    assert view.sampling_rate == 0.05 and view.rounds == 150
    accountant = _pld_accountant()
    accountant.compose(dp_event(view))
    other = dp_accounting.PoissonSampledDpEvent(
        0.05, dp_accounting.GaussianDpEvent(1 / first.mu_step)
    )
    accountant.compose(dp_accounting.SelfComposedDpEvent(other, 250))
    together = compose_runs([first, second], relation)
    assert accountant.get_epsilon(DELTA) == pytest.approx(together.epsilon, abs=PLD_TOLERANCE)
    assert together.epsilon > first.epsilon + 0.1, (first.epsilon, together.epsilon)


def test_the_exported_pld_is_pessimistic_and_matches_dpdls_epsilon(reports, ring_noise) -> None:
    """(b) The PLD's epsilon at delta is never below dpdl's (itself never below the exact value
    of GDP) and above it by less than the discretisation allows: at 1e-4 by under 1e-3, at a
    coarse 1e-2 by more but never less. The example-level PLD is dpdl's own computation."""
    for report in reports:
        view = view_of(reports, report.threat)
        fine = privacy_loss_distribution(view).get_epsilon_for_delta(DELTA)
        coarse = privacy_loss_distribution(view, 1e-2).get_epsilon_for_delta(DELTA)
        assert report.epsilon - 1e-9 <= fine <= report.epsilon + PLD_TOLERANCE, report.threat
        assert coarse >= fine - 1e-9
    example = account(ring_noise, Colluding(1), ExampleLevel(4.0, 4, 0.05), 200, DELTA)
    exported = privacy_loss_distribution(view_of(example)).get_epsilon_for_delta(DELTA)
    assert exported == pytest.approx(example.epsilon, abs=1e-9)


def test_the_trade_off_curve_is_gdps_closed_form(reports) -> None:
    """(c) `G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)` (scipy.stats.norm), symmetric
    (`G(G(alpha)) = alpha`), convex and decreasing; its supporting lines of slope `-e^eps`
    (`delta(eps) = 1 - min_alpha (G(alpha) + e^eps alpha)`) give gdp's (eps, delta)."""
    curve = tradeoff(view_of(reports, "eavesdropper"))
    mu = curve.mu
    alpha, beta = curve.grid(20001)
    assert alpha[0] == 0.0 and alpha[-1] == 1.0 and beta[0] == 1.0 and beta[-1] == 0.0
    np.testing.assert_allclose(beta, norm.cdf(norm.ppf(1 - alpha) - mu), atol=1e-14)
    inner = alpha[1:-1]
    np.testing.assert_allclose(curve(curve(inner)), inner, atol=1e-12)
    assert (np.diff(beta) <= 0).all()
    assert (np.diff(beta, 2) >= -1e-12).all()
    fine = np.concatenate([np.logspace(-14, -2, 4000), np.linspace(0.01, 1, 4000)])
    for eps in (0.5, 1.0, 2.0, reports[0].epsilon):
        from_lines = 1.0 - float(np.min(curve(fine) + math.exp(eps) * fine))
        assert from_lines == pytest.approx(gdp.delta(eps, mu), rel=1e-3, abs=1e-12)
        assert curve.delta(eps) == gdp.delta(eps, mu)
    assert curve.epsilon(DELTA) == pytest.approx(reports[0].epsilon, rel=1e-12)
    assert np.array_equal(TradeOffCurve(math.inf)(alpha), np.zeros_like(alpha))
    np.testing.assert_allclose(TradeOffCurve(0.0)(alpha), 1 - alpha, atol=1e-15)
    with pytest.raises(PrivacyParameterError, match=r"alpha"):
        curve([0.5, 1.5])


def _hockey_stick(eps: float, shift: np.ndarray, covariance: np.ndarray) -> float:
    """`delta(eps) = E_P [1 - e^(eps - L)]_+` of `P = N(shift, S)` against `Q = N(0, S)`,
    integrated on a grid of the plane (independently of any whitening)."""
    axis = np.linspace(-12, 12, 1201)
    x, y = np.meshgrid(axis, axis)
    points = np.stack([x, y], axis=-1)
    p = multivariate_normal(shift, covariance).pdf(points)
    q = multivariate_normal(np.zeros(2), covariance).pdf(points)
    return float(np.sum(np.maximum(p - math.exp(eps) * q, 0.0)) * (axis[1] - axis[0]) ** 2)


def test_per_coordinate_scalar_events_underestimate_a_correlated_release() -> None:
    """(d) The pitfall google/differential-privacy PR #430 documents: a 2-output Gaussian release,
    mean shift `m = (1, 1)`, unit variances of correlation -0.9, accounted as two scalar
    Gaussians (each coordinate with its own sigma: noise multiplier 1 each) composes to
    `sqrt(2)`-GDP; the release is `||S^-1/2 m|| = sqrt(2 / 0.1) = sqrt(20)`-GDP, which the
    hockey-stick divergence integrated on the plane confirms and dpdl's export gives."""
    shift, covariance = np.array([1.0, 1.0]), np.array([[1.0, -0.9], [-0.9, 1.0]])
    accountant = _pld_accountant()
    for k in range(2):
        accountant.compose(dp_accounting.GaussianDpEvent(math.sqrt(covariance[k, k]) / shift[k]))
    per_coordinate = accountant.get_epsilon(DELTA)
    view = gaussian_view(shift, covariance)
    assert view.mu == pytest.approx(math.sqrt(20.0), rel=1e-12)
    exact_accountant = _pld_accountant()
    exact_accountant.compose(dp_event(view))
    exported = exact_accountant.get_epsilon(DELTA)
    assert exported == pytest.approx(gdp.epsilon(math.sqrt(20.0), DELTA), abs=PLD_TOLERANCE)
    assert per_coordinate < exported / 4  # 6.57 against 28.4: under a quarter of the true loss
    for eps in (1.0, 3.0):
        truth = _hockey_stick(eps, shift, covariance)
        assert truth == pytest.approx(gdp.delta(eps, view.mu), rel=1e-3)
        assert gdp.delta(eps, math.sqrt(2.0)) < truth / 2


def test_dpdls_own_views_are_the_whitened_value_not_the_per_coordinate_one() -> None:
    """(d) In dpdl's setting, an eavesdropper seeing two agents' messages with anti-correlated
    noise: agent 0's change `2C e_0` has whitened sensitivity `2C sqrt([S^-1]_00)`, 2.29 times
    the per-coordinate `2C / sqrt(S_00)`, and the accountant's report exports that value."""
    covariance = np.array([[1.0, -0.9], [-0.9, 1.0]])
    report = account(covariance, Eavesdropper(), AgentLevel(0.5), 1, DELTA)
    exported = view_of(report).mu
    whitened = whitened_sensitivity(np.array([1.0, 0.0]), covariance)
    assert exported == pytest.approx(whitened, rel=1e-9) and exported >= whitened
    assert exported == pytest.approx(1.0 / math.sqrt(0.19), rel=1e-9)
    assert exported > 2.2 * 1.0  # the per-coordinate 2C / sqrt(S_00) = 1


def test_pair_views_are_the_accountants_per_pair_values(reports, ring_noise) -> None:
    """Each curious agent's view of each other agent; the worst pair is the report's."""
    relation = AgentLevel(0.05)
    values = {
        (a, i): pair_view(ring_noise, Colluding(1), relation, STEPS, (a,), i).mu_step
        for a in range(6)
        for i in range(6)
        if a != i
    }
    assert max(values.values()) == reports[1].mu_step
    assert values[(0, 1)] > values[(0, 3)]  # a neighbour holds a secret: it learns more
    view = pair_view(ring_noise, Colluding(1), relation, STEPS, (0,), 3)
    assert view.rounds == STEPS and "agent 3" in view.description
    with pytest.raises(ConfigError, match="not an honest agent"):
        pair_view(ring_noise, Colluding(1), relation, STEPS, (0,), 0)


def test_reports_are_read_from_what_users_hold(reports) -> None:
    """A report, its `as_dict` (final.json), a list, or an object holding them in `privacy`."""

    class Result:
        privacy = reports

    by_threat = view_of(reports, "colluding-2")
    assert view_of([r.as_dict() for r in reports], "colluding-2") == by_threat
    assert view_of(Result(), "colluding-2") == by_threat
    assert view_of(Result()).threat == "eavesdropper"
    assert json.loads(json.dumps(reports[2].as_dict()))["sampling_rate"] is None
    with pytest.raises(ConfigError, match="no privacy report against threat 'central'"):
        view_of(reports, "central")
    with pytest.raises(ConfigError, match="expected a PrivacyReport"):
        view_of(3.0)


def test_views_that_are_not_a_gaussian_are_refused_not_approximated(reports) -> None:
    """An accountant dpdl cannot export raises; an example-level report without its rate asks
    for the relation; no noise is NonPrivateDpEvent and has no PLD."""
    custom = reports[0].as_dict() | {"accountant": "someone's bound"}
    with pytest.raises(ConfigError, match="not a \\(subsampled\\) Gaussian dpdl can export"):
        view_of(custom)
    old = {
        **reports[0].as_dict(),
        "accountant": "pld",
        "neighbouring": str(ExampleLevel(4.0, 4, 0.05)),
    }
    del old["sampling_rate"]
    with pytest.raises(ConfigError, match="does not record its Poisson sampling rate"):
        view_of(old)
    assert view_of(old, neighbouring=ExampleLevel(4.0, 4, 0.05)).sampling_rate == 0.05
    with pytest.raises(ConfigError, match="not mu-GDP"):
        tradeoff(view_of(old, neighbouring=ExampleLevel(4.0, 4, 0.05)))
    silent = reports[0].as_dict() | {"accountant": "none (no noise)", "mu_step": math.inf}
    assert isinstance(dp_event(view_of(silent)), dp_accounting.NonPrivateDpEvent)
    with pytest.raises(ConfigError, match="no guarantee"):
        privacy_loss_distribution(view_of(silent))
    assert isinstance(dp_event(View(0.0, 3)), dp_accounting.NoOpDpEvent)
    with pytest.raises(ConfigError, match="rounds"):
        View(0.1, 0)


def test_whole_run_views_are_one_gaussian() -> None:
    """Time-correlated noise (MAFALDA-SGD Theorem 8) and two phases account the whole run as
    one mu-GDP Gaussian: exported as `GaussianDpEvent(1 / mu)`, not as identical rounds."""
    from dpdl.jobspec.factorized import ACCOUNTANT

    assert ACCOUNTANT in WHOLE_RUN_ACCOUNTANTS
    mu = 1.3
    report = PrivacyReport(gdp.epsilon(mu, DELTA), DELTA, 90, mu / math.sqrt(90), "eavesdropper",
                           "example-level (replace one)", ACCOUNTANT)  # fmt: skip
    view = view_of(report)
    assert view.rounds == 1 and mu <= view.mu <= mu * (1 + 1e-15)
    event = dp_event(view)
    assert isinstance(event, dp_accounting.GaussianDpEvent)
    assert view.epsilon(DELTA) == pytest.approx(report.epsilon, rel=1e-12)


def test_the_json_exports(reports) -> None:
    """Plain JSON: the event's named tuple, the PLD's mass functions (mass 1 with the
    infinity mass), the curve on its grid."""
    view = view_of(reports, "eavesdropper")
    event = json.loads(json.dumps(export_json(view, "event")))
    assert event["dp_event"]["class_name"] == "SelfComposedDpEvent"
    assert event["dp_event"]["count"] == STEPS
    assert event["dp_event"]["event"]["noise_multiplier"] == 1 / view.mu_step
    eps = event["epsilon"]["1e-05"]  # the view's mu padded up for its rounding: never below
    assert reports[0].epsilon <= eps == pytest.approx(reports[0].epsilon, rel=1e-14)
    pld = export_json(view, "pld", discretization=1e-3)["pld"]
    mass = sum(pld["remove"]["probabilities"]) + pld["remove"]["infinity_mass"]
    assert pld["pessimistic_estimate"] and mass == pytest.approx(1.0, abs=1e-9)
    fdp = export_json(view, "fdp", points=11)["fdp"]
    assert len(fdp["alpha"]) == 11 and fdp["beta"][0] == 1.0
    with pytest.raises(ConfigError, match="unknown export format"):
        export_json(view, "pickle")


def test_the_example_prints_what_its_page_shows() -> None:
    """`examples/export_privacy.py` runs and prints `examples/outputs/export_privacy.txt`, which
    the how-to page includes (rewrite it with `python examples/export_privacy.py >
    examples/outputs/export_privacy.txt` after a change that moves the numbers)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "export_privacy.py")],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    assert result.stdout == (ROOT / "examples" / "outputs" / "export_privacy.txt").read_text()
    page = (ROOT / "docs" / "howto" / "export-privacy.md").read_text()
    assert '--8<-- "examples/export_privacy.py"' in page
    assert '--8<-- "examples/outputs/export_privacy.txt"' in page


def test_matrix_factorization_pairs_export_as_one_gaussian_each() -> None:
    """MAFALDA-SGD's pairwise trust (PNDP, one attacking agent): `agent_sensitivities` gives the
    whole run's sensitivity per protected agent; `View(Delta sens_i)` is that pair's view, one
    `GaussianDpEvent`, and the worst pair's epsilon is `knowledge_epsilon`'s."""
    import networkx as nx

    from dpdl.factorization import (
        PNDP,
        Participation,
        agent_sensitivities,
        attacker_knowledge,
        dp_dsgd,
        knowledge_epsilon,
    )
    from dpdl.graphs.mixing import metropolis_hastings

    algorithm = dp_dsgd(metropolis_hastings(nx.cycle_graph(5)), 6, sigma=2.0)
    participation = Participation.every_step(6)
    knowledge = attacker_knowledge(algorithm, PNDP((0,)))
    sensitivities = agent_sensitivities(knowledge, participation)
    views = [View(0.5 * s, threat="PNDP attacker 0") for s in sensitivities[1:]]
    assert views[0].mu > 2 * views[1].mu  # a neighbour's messages reach the attacker directly
    event = dp_event(views[0])
    assert event == dp_accounting.GaussianDpEvent(1 / views[0].mu)
    eps, mu = knowledge_epsilon(knowledge, participation, 0.5, DELTA)
    assert max(view.mu for view in views) == mu
    assert max(view.epsilon(DELTA) for view in views) == eps
