"""DECOR Appendix D.1's example-level accounting (Wang et al. 2019's subsampled RDP bound), the
eps labels of the authors' code, and the search's per-step budget.

References: the values of the authors' released ``utils/dp_account.py: rdp_subsample`` (for
``eps(alpha) = alpha mu^2 / 2``, rate 64/3750), recorded here from a run of that function; and
Wang et al. (2019) Theorem 9 at order 2 in closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpdl.accounting import AgentLevel, ExampleLevel, account
from dpdl.accounting.accountant import pld_epsilon
from dpdl.accounting.rdp_bound import paper_epsilon
from dpdl.accounting.subsampled_rdp import wang_epsilon, wang_rdp
from dpdl.errors import ConfigError, PrivacyParameterError
from dpdl.graphs import ring
from dpdl.mechanisms.decor import Decor
from dpdl.threats import Eavesdropper
from dpdl_reproductions.decor_labels import AUTHORS_RATE, authors_label, label_mu_step
from dpdl_reproductions.decor_search import centre_sigma_cdp, largest_rise, per_step_rdp

#: (mu, order) -> the authors' rdp_subsample at rate 64/3750.
AUTHORS_RDP_SUBSAMPLE = {
    (0.5, 2): 0.00033085885498189947,
    (0.5, 5): 0.0008793134819352089,
    (0.5, 10): 0.0019369993492740056,
    (1.5, 2): 0.005511788863378894,
    (1.5, 5): 0.7344581827242233,
    (1.5, 10): 6.804096418342083,
}


@pytest.mark.parametrize(("mu", "order"), list(AUTHORS_RDP_SUBSAMPLE))
def test_wang_bound_matches_the_authors_code(mu: float, order: int) -> None:
    assert wang_rdp(mu, AUTHORS_RATE, order) == pytest.approx(
        AUTHORS_RDP_SUBSAMPLE[(mu, order)], rel=1e-12
    )


def test_wang_bound_at_order_2_is_theorem_9_in_closed_form() -> None:
    for mu, q in ((0.3, 0.01), (2.0, 0.1), (5.0, 0.5)):
        e2 = mu**2
        expected = math.log(1 + q**2 * min(4 * math.expm1(e2), 2 * math.exp(e2)))
        assert wang_rdp(mu, q, 2) == pytest.approx(expected, rel=1e-12)
    assert math.isfinite(wang_rdp(10.0, 0.02, 256))  # summed in log space, no overflow
    with pytest.raises(PrivacyParameterError):
        wang_rdp(1.0, 0.02, 1)


def test_wang_epsilon_composes_more_than_one_step_and_bounds_the_poisson_pld() -> None:
    """Composed over T it is far above one step's label; at the replace-one sensitivity 2C/B it
    is above the exact PLD of the add/remove relation at C/B (a looser bound of a stronger
    relation)."""
    for mu in (0.3, 0.8, 1.5):
        composed = wang_epsilon(2 * mu, AUTHORS_RATE, 1000, 1e-5)
        assert composed > 100 * authors_label(mu, AUTHORS_RATE)
        assert composed > pld_epsilon(mu, AUTHORS_RATE, 1000, 1e-5)


def test_a_label_and_its_noise_round_trip() -> None:
    for label in (0.1, 0.5, 1.0, 3.0):
        mu = label_mu_step(label, AUTHORS_RATE)
        assert authors_label(mu, AUTHORS_RATE) == pytest.approx(label, rel=1e-8)


def test_per_step_rdp_inverts_the_papers_composition() -> None:
    """Appendix D.1 step 1: T e + 2 sqrt(T e log(1/delta)) = eps, i.e. paper_epsilon at
    mu_step = sqrt(2 e) (a step of RDP alpha e is a Gaussian of mu^2 / 2 = e)."""
    for eps in (3.0, 10.0, 40.0):
        e = per_step_rdp(eps)
        assert paper_epsilon(math.sqrt(2 * e), 1000, 1e-5) == pytest.approx(eps, rel=1e-12)
        low, high = math.sqrt(2 / (16 * e)), math.sqrt(2 / e)
        assert centre_sigma_cdp(eps) == pytest.approx((low + high) / 2)


def test_eps_is_non_increasing_in_sigma_cor_at_both_levels() -> None:
    """Fig. 2 and 3's monotonicity: Sigma grows in the Loewner order with sigma_cor, so
    max_i [Sigma^-1]_ii cannot rise, and every accounting is increasing in it."""
    graph, threat = ring(16), Eavesdropper()
    user = [
        account(Decor(graph, 22.4, s), threat, AgentLevel(1.0), 1000, 1e-5).epsilon
        for s in (1.0, 10.0, 100.0, 1000.0)
    ]
    example = [
        authors_label(
            account(
                Decor(graph, 0.005, s), threat, ExampleLevel(1.0, 64, AUTHORS_RATE), 1000, 1e-5
            ).mu_step,
            AUTHORS_RATE,
        )
        for s in (5e-4, 5e-3, 5e-2)
    ]
    assert largest_rise(np.array(user)) == 0.0 and user[0] > 2 * user[-1]
    assert largest_rise(np.array(example)) == 0.0 and example[0] > 100 * example[-1]
    assert largest_rise(np.array([1.0, 2.0, 1.0])) == 1.0


@pytest.mark.parametrize(("mu", "size"), [(0.5, 64), (1.5, 64), (0.8, 375)])
def test_wang_bound_is_dp_accountings_without_replacement_bound_or_above(
    mu: float, size: int
) -> None:
    """An independent computation of the same theorem: dp_accounting's RDP of the Gaussian on a
    subsample drawn without replacement (replace-one) equals this bound at order 2 and is never
    above it (it takes a tighter term at small mu)."""
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    orders = [2, 3, 5, 10, 20, 64]
    accountant = RdpAccountant(
        orders, neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    accountant.compose(
        dp_accounting.SampledWithoutReplacementDpEvent(
            3750, size, dp_accounting.GaussianDpEvent(1 / mu)
        )
    )
    # the per-order RDP: dp_accounting exposes no public reader of it
    theirs = dict(zip(orders, accountant._rdp, strict=True))
    ours = {order: wang_rdp(mu, size / 3750, order) for order in orders}
    assert ours[2] == pytest.approx(theirs[2], rel=1e-9)
    for order in orders:
        assert ours[order] >= theirs[order] * (1 - 1e-9)


def test_the_appendix_d_couple_search_builds_the_kth_couple_and_refuses_a_missing_one() -> None:
    """DECOR Appendix D.2 tunes over the couples: ``appendix-d-<k>`` builds exactly the k-th of
    Appendix D.1's search (the reproductions' registration); a couple the search did not find, or
    a place that is no number, is one clear error."""
    from dpdl.accounting import calibrate
    from dpdl.errors import ConfigError
    from dpdl.graphs import erdos_renyi, metropolis_hastings
    from dpdl.mechanisms.decor import appendix_d_couples
    from dpdl.mechanisms.registry import DesignOptions, build_mechanism
    from dpdl.registry import load_plugins

    load_plugins()
    graph = erdos_renyi(12, 0.5, seed=4)
    weights = metropolis_hastings(graph)
    calibration = calibrate(10.0, 1e-5, 1000, AgentLevel(1.0))
    couples = appendix_d_couples(graph, calibration)

    def build(search: str):
        options = DesignOptions(decor_search=search)
        return build_mechanism("decor", graph, weights, calibration, options)

    for k, couple in enumerate(couples):
        built = build(f"appendix-d-{k}")
        assert (built.sigma_pair, built.sigma_cor) == (couple.sigma_pair, couple.sigma_cor)
    with pytest.raises(ConfigError, match="couple 3 asked for, but the Appendix D search found 3"):
        build("appendix-d-3")
    with pytest.raises(ConfigError, match="a number from 0, not 'x'"):
        build("appendix-d-x")


def test_the_authors_couple_search_finds_the_couples_of_their_search_files() -> None:
    """``authors-<k>``: the couples the authors' released search (``utils/plotting.py:
    find_best_params`` and ``find_sigma_cor``) kept for their least squares on the ring of 16
    agents at eps = 10 (T = 3500, delta = 1e-5, C = 1), as their committed search file
    ``quadratics_for_n_16/numerical_results_for_n_16_and_clip_1/result_gridsearch_ring_Corr_
    epsilon_10.csv`` records them: the target, each kept (sigma, sigma_cor) and its per-round
    value, above the target by up to the bisection's tolerance; the first place of the grid has
    no couple, as in their file."""
    import networkx as nx

    from dpdl.accounting import calibrate
    from dpdl_reproductions.decor_searches import NoCouple, authors_couple, authors_eps_iter

    graph = nx.cycle_graph(16)
    calibration = calibrate(10.0, 1e-5, 3500, AgentLevel(1.0), "authors")
    assert calibration.mu_step**2 / 2 == pytest.approx(0.00044295863673583433, rel=1e-14)
    their_rows = {  # place in the grid: (sigma, sigma_cor, eps_iter) of their file
        1: (17.827099282407094, 188.0, 0.0004656256603611915),
        2: (18.855585779469042, 126.0, 0.0005042182991847745),
        3: (19.88407227653099, 126.0, 0.0004673573255629589),
    }
    for k, (sigma, sigma_cor, eps_iter) in their_rows.items():
        couple = authors_couple(graph, None, calibration, None, None, str(k))
        assert couple.sigma_pair == pytest.approx(sigma, rel=1e-14)
        assert couple.sigma_cor == sigma_cor
        value = authors_eps_iter(graph, couple.sigma_pair, couple.sigma_cor, 1.0)
        assert value == pytest.approx(eps_iter, rel=1e-12)
        assert 0 < value - calibration.mu_step**2 / 2 < 1e-4  # above the target, within tolerance
    with pytest.raises(NoCouple, match=r"no sigma_cor for sigma = 16\.79"):
        authors_couple(graph, None, calibration, None, None, "0")
    with pytest.raises(ConfigError, match="from 0 to 49, not '50'"):
        authors_couple(graph, None, calibration, None, None, "50")
