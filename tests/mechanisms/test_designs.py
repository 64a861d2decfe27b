"""Correlated-noise designs: the papers' comparison, the solvers against CVXPY, special cases."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from dpdl.accounting import AgentLevel, account, calibrate
from dpdl.graphs import complete, erdos_renyi, max_degree, metropolis_hastings
from dpdl.mechanisms import LocalDP
from dpdl.mechanisms.decor import Decor
from dpdl.mechanisms.registry import build_mechanism
from dpdl.mechanisms.whisper import disjoint_groups
from dpdl.solvers.coalition import solve_multiseed, solve_whisper_sdp
from dpdl.solvers.whisper_dual import solve_whisper
from dpdl.threats import Eavesdropper

DELTA, STEPS, CLIP = 1e-5, 5000, 0.1


def _trace(weights: np.ndarray, covariance: np.ndarray) -> float:
    return float(np.trace(weights @ covariance @ weights.T))


def test_whisper_beats_decor_beats_ldp_at_the_same_achieved_epsilon() -> None:
    """CorN-DSGD Fig. 1 on Erdos-Renyi n=20: Whisper <= DECOR <= LDP for every p and eps, each
    mechanism's epsilon checked by the accountant; equal at p=1; absolute gap widest at low p."""
    gaps = {}
    for p in (0.2, 0.4, 0.6, 0.8, 1.0):
        graph = erdos_renyi(20, p, seed=0)
        weights = metropolis_hastings(graph)
        for eps in (3.0, 10.0, 40.0):
            calibration = calibrate(eps, DELTA, STEPS, AgentLevel(CLIP))
            traces = {}
            for name in ("ldp", "decor", "whisper"):
                mechanism = build_mechanism(name, graph, weights, calibration)
                achieved = account(
                    mechanism, Eavesdropper(), AgentLevel(CLIP), STEPS, DELTA
                ).epsilon
                assert eps * (1 - 1e-6) <= achieved <= eps, (name, p, eps, achieved)
                traces[name] = _trace(weights, mechanism.covariance())
            assert traces["whisper"] <= traces["decor"] * (1 + 1e-6), (p, eps, traces)
            assert traces["decor"] <= traces["ldp"] * (1 + 1e-9), (p, eps, traces)
            if eps == 10.0:
                gaps[p] = traces["decor"] - traces["whisper"]
            if p == 1.0:
                assert traces["whisper"] == pytest.approx(traces["decor"], rel=1e-5)
                assert traces["whisper"] < traces["ldp"] / 10
            elif p <= 0.8:
                assert traces["whisper"] < 0.9 * traces["decor"]
    assert gaps[0.2] == max(gaps.values())
    assert gaps[1.0] < 1e-3 * gaps[0.2]


@pytest.mark.parametrize("n", [10, 20])
def test_dual_solver_agrees_with_cvxpy_and_meets_every_constraint(n: int) -> None:
    weights = metropolis_hastings(erdos_renyi(n, 0.5, seed=2))
    c = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP)).inverse_variance_bound
    ours = solve_whisper(weights, c)
    reference, _ = solve_whisper_sdp(weights, c)
    assert _trace(weights, ours.covariance) == pytest.approx(_trace(weights, reference), rel=1e-5)
    assert np.diag(np.linalg.inv(ours.covariance)).max() <= c * (1 + 1e-9)
    assert 0 <= ours.gap < 1e-9  # certified by the dual value


def test_singular_mixing_matrix_is_capped_and_reported() -> None:
    """Complete graph with uniform weights: W = 11^T/n, the infimum 1/(n c) is not attained."""
    n, c = 12, 0.5
    weights = max_degree(complete(n))
    solution = solve_whisper(weights, c)
    assert solution.kernel_dimension == n - 1 and solution.cap > 0
    assert np.isfinite(solution.covariance).all()
    assert _trace(weights, solution.covariance) == pytest.approx(1 / (n * c), rel=1e-6)
    assert _trace(weights, solution.covariance) >= 1 / (n * c) * (1 - 1e-12)
    eigenvalues = np.linalg.eigvalsh(solution.covariance)
    assert eigenvalues[0] > 0 and eigenvalues[-1] / eigenvalues[0] > 1e6  # the capped kernel noise
    precision = np.linalg.inv(solution.covariance)
    assert np.diag(precision).max() <= c * (1 + 1e-6)


def test_multiseed_program_recovers_its_special_cases() -> None:
    n = 8
    weights = metropolis_hastings(erdos_renyi(n, 0.5, seed=1))
    c = 0.7
    ldp = np.trace(weights @ weights.T) / c
    whisper = solve_whisper(weights, c).objective
    one_group_eavesdropper = solve_multiseed(weights, disjoint_groups(n, 1), 0, c).objective
    assert one_group_eavesdropper == pytest.approx(whisper, rel=1e-5)
    # One seed known to all: a single curious agent knows the correlated part, only LDP remains.
    assert solve_multiseed(weights, disjoint_groups(n, 1), 1, c).objective == pytest.approx(
        ldp, rel=1e-5
    )
    # One seed per agent and full collusion: LDP.
    assert solve_multiseed(weights, disjoint_groups(n, n), n - 1, c).objective == pytest.approx(
        ldp, rel=1e-5
    )
    # Restricting correlation to groups costs utility against the eavesdropper: between Whisper and
    # LDP.
    two_groups = solve_multiseed(weights, disjoint_groups(n, 2), 0, c).objective
    assert whisper * (1 - 1e-6) <= two_groups <= ldp * (1 + 1e-6)


def test_multiseed_mechanism_meets_its_budget_against_curious_agents() -> None:
    from dpdl.mechanisms.registry import DesignOptions
    from dpdl.threats import Colluding

    graph = erdos_renyi(7, 0.6, seed=3)
    weights = metropolis_hastings(graph)
    calibration = calibrate(5.0, DELTA, 100, AgentLevel(CLIP))
    mechanism = build_mechanism(
        "whisper-multiseed", graph, weights, calibration, DesignOptions(groups=7, q=1)
    )
    assert mechanism.default_threat == Colluding(1)
    report = account(mechanism, Colluding(1), AgentLevel(CLIP), 100, DELTA)
    assert 5.0 * (1 - 1e-5) <= report.epsilon <= 5.0


def _dpdl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dpdl.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_noise_command_with_paper_calibration_uses_the_papers_constraint(tmp_path) -> None:
    graph = erdos_renyi(15, 0.4, seed=5)
    path = tmp_path / "g.txt"
    path.write_text("# test graph\n" + "\n".join(f"{u} {v}" for u, v in graph.edges()) + "\n")
    result = _dpdl(
        "noise",
        "--method",
        "whisper",
        "--graph",
        f"edgelist:{path}",
        "--eps",
        "10",
        "--delta",
        "1e-5",
        "--steps",
        "5000",
        "--clip",
        "0.1",
        "--calibration",
        "paper",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for key in ("method", "trace_WRW", "sigma_mix2", "epsilon", "solve_seconds"):
        assert key in report
    c_paper = 10.0**2 / (16 * 0.1**2 * 5000 * math.log(1e5))
    assert report["calibration"]["inverse_variance_bound"] == pytest.approx(c_paper, rel=1e-12)
    weights = metropolis_hastings(graph)
    independent = solve_whisper_sdp(weights, c_paper)[0]
    assert report["trace_WRW"] == pytest.approx(_trace(weights, independent), rel=1e-4)
    assert report["epsilon"]["eavesdropper"] < 10.0  # the closed form is conservative at eps=10


def test_noise_command_reports_overshoot_and_infinite_epsilon() -> None:
    overshoot = _dpdl(
        "noise",
        "--method",
        "ldp",
        "--graph",
        "ring",
        "--n",
        "8",
        "--eps",
        "40",
        "--calibration",
        "paper",
        "--json",
    )
    assert overshoot.returncode == 0, overshoot.stderr
    assert "overshoots" in overshoot.stderr
    report = json.loads(overshoot.stdout.strip().splitlines()[-1])
    assert report["epsilon"]["eavesdropper"] == pytest.approx(41.76, abs=0.01)
    zero_sum = _dpdl("noise", "--method", "zero-sum", "--graph", "ring", "--n", "8", "--json")
    assert zero_sum.returncode == 0, zero_sum.stderr
    report = json.loads(zero_sum.stdout.strip().splitlines()[-1])
    assert set(report["epsilon"].values()) == {"Infinity"}


def test_decor_appendix_d_search_meets_the_budget_and_trace_design_is_no_worse() -> None:
    """DECOR Appendix D.1: couples on a grid of sigma_pair between CDP and LDP levels, each meeting
    the budget; the trace-optimal design is at least as good as the best of them."""
    from dpdl.mechanisms.decor import appendix_d_couples, design_decor

    graph = erdos_renyi(12, 0.5, seed=4)
    weights = metropolis_hastings(graph)
    calibration = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP))
    couples = appendix_d_couples(graph, calibration)
    assert len(couples) == 3
    pairs = [m.sigma_pair for m in couples]
    assert pairs == sorted(pairs) and pairs[0] < pairs[-1]
    for mechanism in couples:
        achieved = account(mechanism, Eavesdropper(), AgentLevel(CLIP), STEPS, DELTA).epsilon
        assert 10.0 * (1 - 1e-6) <= achieved <= 10.0
    best = min(_trace(weights, m.covariance()) for m in couples)
    assert _trace(weights, design_decor(graph, weights, calibration).covariance()) <= best * (
        1 + 1e-9
    )


def test_decor_builds_the_couple_its_registered_search_picks() -> None:
    """``decor_search`` names a search of :data:`DECOR_SEARCH_REGISTRY`: ``appendix-d`` is the
    Appendix D couple of least Tr(W R W^T); a search registered as a template
    (``pick-<k>``) gets its parameter's text; an unknown one is refused naming the known ones."""
    from dpdl.choices import DECOR_SEARCH_REGISTRY
    from dpdl.errors import ConfigError
    from dpdl.mechanisms.decor import appendix_d_couples
    from dpdl.mechanisms.registry import DesignOptions, build_mechanism

    graph = erdos_renyi(12, 0.5, seed=4)
    weights = metropolis_hastings(graph)
    calibration = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP))
    couples = appendix_d_couples(graph, calibration)

    def build(search: str):
        options = DesignOptions(decor_search=search)
        return build_mechanism("decor", graph, weights, calibration, options)

    best = min(couples, key=lambda m: _trace(weights, m.covariance()))
    assert (build("appendix-d").sigma_pair, build("appendix-d").sigma_cor) == (
        best.sigma_pair,
        best.sigma_cor,
    )

    @DECOR_SEARCH_REGISTRY.register("pick-<k>", help="the k-th Appendix D couple")
    def pick(graph, weights, calibration, threat, objective, k):
        return appendix_d_couples(graph, calibration, threat)[int(k)]

    try:
        for k, couple in enumerate(couples):
            built = build(f"pick-{k}")
            assert (built.sigma_pair, built.sigma_cor) == (couple.sigma_pair, couple.sigma_cor)
    finally:
        DECOR_SEARCH_REGISTRY.unregister("pick-<k>")
    with pytest.raises(ConfigError, match=r"decor_search.*unknown DECOR search 'pick-0'; known"):
        DesignOptions(decor_search="pick-0")


def test_a_design_without_correlation_holds_no_secret_and_draws_as_ldp() -> None:
    graph = erdos_renyi(10, 0.5, 2)
    uncorrelated = Decor(graph, 0.8, 0.0)
    assert uncorrelated.secrets == () and uncorrelated.describe()["shared_secrets"] == 0
    assert np.array_equal(uncorrelated.covariance(), LocalDP(10, 0.8).covariance())
    assert np.array_equal(
        uncorrelated.sample(np.random.default_rng(1), 5),
        LocalDP(10, 0.8).sample(np.random.default_rng(1), 5),
    )
    assert len(Decor(graph, 0.8, 1e-300).secrets) == graph.number_of_edges()
