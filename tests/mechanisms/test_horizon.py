"""The horizon objective (docs/horizon.md): the loss the noise leaves after T steps, and the designs
that minimise it under the same privacy constraint as the one-step designs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpdl.accounting import AgentLevel, account, calibrate
from dpdl.errors import ConfigError
from dpdl.graphs import build_graph, erdos_renyi, metropolis_hastings, ring
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.curvature import task_curvature
from dpdl.jobspec.engine import DSGDConfig, StepSize
from dpdl.jobspec.job import build_job
from dpdl.mechanisms import Curvature, Horizon, LocalDP
from dpdl.mechanisms.horizon import horizon_weight
from dpdl.mechanisms.registry import build_mechanism
from dpdl.mechanisms.whisper import design_whisper
from dpdl.settings import DesignOptions
from dpdl.simulation import run_dsgd
from dpdl.solvers.coalition import solve_whisper_sdp
from dpdl.solvers.whisper_dual import solve_weighted, solve_whisper
from dpdl.tasks.quadratic import QuadraticObjectives

DELTA, STEPS, CLIP = 1e-5, 1000, 0.1


def _exact_error(
    weights: np.ndarray, hessians: np.ndarray, etas: np.ndarray, covariance: np.ndarray
) -> float:
    """Brute force: the covariance of the noise part z of the iterates, propagated step by step
    through z <- W (z - eta_t (D z + v_t)) on the stacked (agents x coordinates) state, then the
    excess loss mean_i z_i^T Hbar z_i / 2."""
    n = weights.shape[0]
    if hessians.ndim == 2:
        hessians = np.broadcast_to(hessians, (n, *hessians.shape))
    d = hessians.shape[-1]
    mixing = np.kron(weights, np.eye(d))
    blocks = np.zeros((n * d, n * d))
    for i in range(n):
        blocks[i * d : (i + 1) * d, i * d : (i + 1) * d] = hessians[i]
    noise = np.kron(covariance, np.eye(d))
    state = np.zeros((n * d, n * d))
    for eta in etas:
        step = mixing @ (np.eye(n * d) - eta * blocks)
        state = step @ state @ step.T + eta**2 * mixing @ noise @ mixing.T
    loss = np.kron(np.eye(n), hessians.mean(axis=0) / (2 * n))
    return float(np.trace(loss @ state))


def _random_psd(rng: np.random.Generator, shape: tuple[int, ...], d: int) -> np.ndarray:
    factors = rng.standard_normal((*shape, d, d))
    return factors @ np.swapaxes(factors, -1, -2) / d


@pytest.mark.parametrize("schedule", ["constant", "inv-sqrt"])
@pytest.mark.parametrize("kind", ["per-agent", "shared-symmetric", "shared-directed"])
def test_horizon_objective_equals_the_exact_error_recursion(schedule: str, kind: str) -> None:
    """Tr(M R) is the excess loss of the brute-force covariance recursion, for any R, per-agent or
    shared Hessians, symmetric or row-stochastic W, constant or decaying steps (T odd: every bit
    of the binary powers is used)."""
    rng = np.random.default_rng(0)
    n, d, steps = 5, 3, 37
    graph = ring(n)
    weights = metropolis_hastings(graph)
    if kind == "shared-directed":
        weights = weights + 0.1 * np.roll(np.eye(n), 1, axis=1)
        weights /= weights.sum(axis=1, keepdims=True)
    hessians = _random_psd(rng, (n,) if kind == "per-agent" else (), d)
    horizon = Horizon(0.1, steps, Curvature(hessians), schedule)
    weight = horizon_weight(weights, horizon)
    for _ in range(3):
        covariance = _random_psd(rng, (), n) + 0.1 * np.eye(n)
        expected = _exact_error(weights, hessians, horizon.step_sizes(), covariance)
        assert float(np.sum(weight * covariance)) == pytest.approx(expected, rel=1e-10)
    assert np.linalg.eigvalsh(weight).min() >= -1e-12 * np.abs(weight).max()


def test_horizon_objective_matches_a_monte_carlo_of_the_training_engine() -> None:
    """The D-SGD engine itself on a quadratic (gradients never clipped): the mean optimality gap
    of noisy runs minus that of the noiseless run is Tr(M R), within 4 standard errors."""
    n, d, steps, trials = 4, 2, 25, 600
    rng = np.random.default_rng(1)
    quadratics = _random_psd(rng, (n,), d) + 0.5 * np.eye(d)
    task = QuadraticObjectives("tiny", quadratics, rng.standard_normal((n, d)))
    weights = metropolis_hastings(erdos_renyi(n, 0.7, seed=0))
    dsgd = DSGDConfig(steps=steps, step_size=StepSize(0.05), clip=1e9, eval_every=steps)
    noise = LocalDP(n, 0.3)
    clean = run_dsgd(task, weights, LocalDP(n, 0.0), dsgd, seed=0).final_metrics["optimality_gap"]
    excess = np.array(
        [
            run_dsgd(task, weights, noise, dsgd, seed=s).final_metrics["optimality_gap"] - clean
            for s in range(trials)
        ]
    )
    weight = horizon_weight(weights, Horizon(0.05, steps, task_curvature(task)))
    predicted = float(np.sum(weight * noise.covariance()))
    assert abs(excess.mean() - predicted) <= 4 * excess.std(ddof=1) / np.sqrt(trials)


def test_the_one_step_weight_gives_todays_solution_exactly() -> None:
    """solve_weighted(W^T W, c) is solve_whisper(W, c), bit for bit, and Whisper designed with that
    weight is the one-step design."""
    weights = metropolis_hastings(erdos_renyi(12, 0.4, seed=3))
    calibration = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP))
    c = calibration.inverse_variance_bound
    ours, today = solve_weighted(weights.T @ weights, c), solve_whisper(weights, c)
    assert np.array_equal(ours.covariance, today.covariance)
    assert ours.objective == today.objective and ours.dual_value == today.dual_value
    weighted = design_whisper(weights, calibration, weights.T @ weights)
    assert np.array_equal(weighted.covariance(), design_whisper(weights, calibration).covariance())


def _horizon(n: int, lr: float = 0.05, steps: int = STEPS) -> Horizon:
    return Horizon(lr, steps, Curvature(np.linspace(0.1, 4.0, n)[:, None, None] * np.eye(2)))


@pytest.mark.parametrize("graph", ["ring", "er", "torus"])
def test_weighted_solver_agrees_with_cvxpy_and_never_exceeds_the_constraint(graph: str) -> None:
    built = build_graph(graph, 16, 0.3, seed=0)
    weights = metropolis_hastings(built)
    weight = horizon_weight(weights, _horizon(16))
    c = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP)).inverse_variance_bound
    ours = solve_weighted(weight, c)
    reference, _ = solve_whisper_sdp(weights, c, objective=weight)
    assert ours.objective == pytest.approx(float(np.sum(weight * reference)), rel=1e-5)
    assert np.diag(np.linalg.inv(ours.covariance)).max() <= c * (1 + 1e-9)
    assert 0 <= ours.gap < 1e-9  # certified by the dual value


@pytest.mark.parametrize(
    ("mechanism", "design"),
    [
        ("whisper", {}),
        ("decor", {}),
        ("decor", {"decor_search": "appendix-d"}),
        ("whisper-multiseed", {"groups": 2, "q": 1}),
    ],
)
def test_horizon_designs_keep_the_budget_and_lower_their_objective(
    mechanism: str, design: dict
) -> None:
    """Both objectives are calibrated to the same budget: the accountant gives the same epsilon
    (the target, never above); each design is at least as good as the other on its own
    objective."""
    n = 8 if mechanism == "whisper-multiseed" else 16
    graph = ring(n)
    weights = metropolis_hastings(graph)
    calibration = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP))
    horizon = _horizon(n)
    weight = horizon_weight(weights, horizon)
    one_step = build_mechanism(mechanism, graph, weights, calibration, DesignOptions(**design))
    whole_run = build_mechanism(
        mechanism,
        graph,
        weights,
        calibration,
        DesignOptions(**design, objective="horizon", horizon=horizon),
    )
    for noise in (one_step, whole_run):
        report = account(noise, noise.default_threat, AgentLevel(CLIP), STEPS, DELTA)
        assert 10.0 * (1 - 1e-6) <= report.epsilon <= 10.0
    loose = 1e-4 if mechanism == "whisper-multiseed" else 1e-6  # an interior-point solver
    assert np.sum(weight * whole_run.covariance()) <= np.sum(weight * one_step.covariance()) * (
        1 + loose
    )
    assert one_step.variance_after_mixing(weights) <= whole_run.variance_after_mixing(weights) * (
        1 + loose
    )


def test_train_designs_for_the_task_and_reports_the_same_epsilon() -> None:
    """dpdl train's job: the horizon is the run's (step size, steps, the task's Hessians), the
    design differs from the one-step one, the epsilon does not."""
    jobs = {
        objective: build_job(
            TrainConfig(
                task="least-squares",
                graph="ring",
                n=10,
                mechanism="whisper",
                eps=5.0,
                steps=300,
                lr=0.02,
                design=DesignOptions(objective=objective),
            ).resolved(),
            0,
        )
        for objective in ("one-step", "horizon")
    }
    one_step, horizon = (jobs[k].mechanism for k in ("one-step", "horizon"))
    assert not np.allclose(one_step.covariance(), horizon.covariance())
    for job in jobs.values():
        report = account(job.mechanism, job.mechanism.default_threat, job.neighbouring, 300, DELTA)
        assert 5.0 * (1 - 1e-6) <= report.epsilon <= 5.0


def test_horizon_objective_is_refused_where_it_cannot_apply() -> None:
    with pytest.raises(ConfigError, match="applies only to mechanism"):
        TrainConfig(mechanism="ldp", design=DesignOptions(objective="horizon"))
    with pytest.raises(ConfigError, match="apply only to the horizon objective"):
        DesignOptions(horizon=_horizon(4))
    graph = ring(6)
    calibration = calibrate(10.0, DELTA, STEPS, AgentLevel(CLIP))
    with pytest.raises(ConfigError, match="needs the run's step size"):
        build_mechanism(
            "whisper",
            graph,
            metropolis_hastings(graph),
            calibration,
            DesignOptions(objective="horizon"),
        )
    with pytest.raises(ConfigError, match="diverges"):
        horizon_weight(metropolis_hastings(graph), Horizon(1.0, 5000, Curvature.scalar(10.0)))
    with pytest.raises(ConfigError, match="curvature of task"):
        build_job(
            TrainConfig(
                task="housing-mlp",
                graph="ring",
                n=4,
                mechanism="whisper",
                eps=5.0,
                steps=10,
                design=DesignOptions(objective="horizon"),
            ).resolved(),
            0,
        )


def test_noise_command_designs_for_the_horizon_at_the_same_epsilon(capsys) -> None:
    """dpdl noise --objective horizon: the run's step size and a scalar curvature; the epsilon is
    the one-step design's, Tr(W R W^T) larger (the design spends it elsewhere); --lr without the
    horizon objective is an error."""
    from dpdl.cli import main

    common = ["noise", "--method", "whisper", "--graph", "ring", "--n", "12", "--eps", "10"]
    common += ["--steps", "1000", "--json"]
    reports = {}
    for objective, extra in (("one-step", []), ("horizon", ["--lr", "0.05", "--curvature", "1"])):
        assert main([*common, "--objective", objective, *extra]) == 0
        reports[objective] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    one_step, horizon = reports["one-step"], reports["horizon"]
    assert horizon["epsilon"]["eavesdropper"] == pytest.approx(10.0, rel=1e-6)
    assert horizon["epsilon"]["eavesdropper"] <= 10.0
    assert horizon["trace_WRW"] > one_step["trace_WRW"]
    assert main([*common, "--lr", "0.05"]) == 2
    assert main([*common, "--objective", "horizon", "--lr", "0.05"]) == 2
