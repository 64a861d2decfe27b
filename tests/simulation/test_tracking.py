"""Gradient tracking (DSGT), LPPA's noise flow and the DP baseline
(LPPA, Algorithm 1, Theorem 1)."""

from __future__ import annotations

import math
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
import torch

from dpdl.accounting import AgentLevel, account, calibrate
from dpdl.errors import ConfigError, MixingMatrixError
from dpdl.experiments.train import TrainConfig, build_job, run_training
from dpdl.graphs import erdos_renyi, metropolis_hastings, sinkhorn_knopp
from dpdl.mechanisms.lppa import design_noise_flow, dp_noise, flow_arcs, lppa_noise
from dpdl.mechanisms.registry import build_mechanism
from dpdl.seeding import purpose_rng
from dpdl.simulation import DSGDConfig, StepSize
from dpdl.simulation.tracking import run_dsgt
from dpdl.tasks import build_task, decor_least_squares
from dpdl.threats import Colluding, Eavesdropper


@pytest.fixture(scope="module")
def directed() -> nx.DiGraph:
    return erdos_renyi(8, 0.3, seed=3, directed=True)


def test_directed_erdos_renyi_is_strongly_connected_and_not_symmetric(directed: nx.DiGraph) -> None:
    assert directed.is_directed() and nx.is_strongly_connected(directed)
    assert any(not directed.has_edge(v, u) for u, v in directed.edges())
    weights = sinkhorn_knopp(directed)
    np.testing.assert_allclose(weights.sum(axis=0), 1.0, atol=1e-10)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-10)


def test_flow_arcs_take_both_directions_of_an_undirected_edge(directed: nx.DiGraph) -> None:
    assert flow_arcs(nx.path_graph(3)) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert flow_arcs(directed) == sorted(directed.edges())


@pytest.mark.parametrize("distribution", ["laplace", "gaussian"])
def test_lppa_injections_sum_to_zero_and_dp_noise_does_not(
    directed: nx.DiGraph, distribution: str
) -> None:
    rng = np.random.default_rng(0)
    lppa = lppa_noise(directed, 0.3, distribution).sample(rng, 1000)
    assert np.abs(lppa.sum(axis=0)).max() < 1e-12 * np.abs(lppa).max() * 10
    assert np.abs(lppa).min(axis=0).max() > 0  # yet every agent's own injection is noisy
    dp = dp_noise(8, 0.3, distribution).sample(rng, 1000)
    assert np.abs(dp.sum(axis=0)).mean() > 0.1


@pytest.mark.parametrize("distribution", ["laplace", "gaussian"])
def test_injection_covariance_matches_its_samples(directed: nx.DiGraph, distribution: str) -> None:
    noise = lppa_noise(directed, 0.5, distribution)
    samples = noise.sample(np.random.default_rng(1), 200_000)
    empirical = samples @ samples.T / samples.shape[1]
    np.testing.assert_allclose(empirical, noise.covariance(), atol=0.03 * noise.covariance().max())
    assert (
        np.linalg.eigvalsh(noise.covariance())[0] < 1e-12
    )  # singular along 1: a directed Laplacian
    np.testing.assert_allclose(noise.covariance() @ np.ones(8), 0.0, atol=1e-12)


def test_dsgt_matches_a_per_agent_reference_of_eqs_2_and_3(directed: nx.DiGraph) -> None:
    task = decor_least_squares(8, 3, np.random.default_rng(0))
    weights = sinkhorn_knopp(directed)
    config = DSGDConfig(steps=25, step_size=StepSize(0.05), eval_every=25)
    result = run_dsgt(task, weights, config)

    def gradients(models: list[np.ndarray]) -> np.ndarray:
        return task.gradients(torch.from_numpy(np.array(models)), None, None).numpy()

    theta = [task.initial_params().numpy() for _ in range(8)]
    gamma = [gradients(theta)[i] for i in range(8)]
    for _ in range(25):
        new = [sum(weights[i, j] * theta[j] for j in range(8)) - 0.05 * gamma[i] for i in range(8)]
        old_grads, new_grads = gradients(theta), gradients(new)
        gamma = [
            sum(weights[i, j] * gamma[j] for j in range(8)) + new_grads[i] - old_grads[i]
            for i in range(8)
        ]
        theta = new
    np.testing.assert_allclose(result.params, np.array(theta), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("local_steps", [2, 5])
def test_local_updates_mix_on_every_kth_step_only_and_keep_tracking_the_gradient_sum(
    directed: nx.DiGraph, local_steps: int
) -> None:
    """LPPA Fig. 6a's local epoch: W on every K-th step, I between (per-agent reference); eq. (3)
    with W = I still keeps sum_i gamma_i = sum_i grad_i plus the injected noise, which enters on
    communication steps only."""
    task = decor_least_squares(8, 3, np.random.default_rng(0))
    weights = sinkhorn_knopp(directed)
    config = DSGDConfig(steps=23, step_size=StepSize(0.05), eval_every=23)
    noise = dp_noise(8, 0.1, every_round=True)
    sums: list[tuple[int, np.ndarray]] = []
    result = run_dsgt(task, weights, config, noise, seed=2, local_steps=local_steps)

    def gradients(models: np.ndarray) -> np.ndarray:
        return task.gradients(torch.from_numpy(models), None, None).numpy()

    rng = purpose_rng(2, "noise")
    theta = np.tile(task.initial_params().numpy(), (8, 1))
    gamma = gradients(theta) + noise.sample(rng, task.dim)
    injected = gamma.sum(axis=0) - gradients(theta).sum(axis=0)
    for t in range(1, 24):
        mixing = weights if t % local_steps == 0 else np.eye(8)
        new = mixing @ theta - 0.05 * gamma
        gamma = mixing @ gamma + gradients(new) - gradients(theta)
        if t % local_steps == 0:
            draw = noise.sample(rng, task.dim)
            gamma, injected = gamma + draw, injected + draw.sum(axis=0)
        theta = new
        sums.append((t, gamma.sum(axis=0) - gradients(theta).sum(axis=0) - injected))
    np.testing.assert_allclose(result.params, theta, rtol=1e-12, atol=1e-14)
    assert max(np.abs(gap).max() for _, gap in sums) < 1e-10
    every_step = run_dsgt(task, weights, config, noise, seed=2).params
    assert np.abs(every_step - theta).max() > 1e-3  # the local updates changed the run
    with pytest.raises(ConfigError, match="local_steps must be an integer >= 1"):
        run_dsgt(task, weights, config, local_steps=0)


@pytest.mark.parametrize("every_round", [False, True])
def test_lppa_reaches_the_noise_free_dsgt_model_and_dp_does_not(
    directed: nx.DiGraph, every_round: bool
) -> None:
    """Theorem 1 on a strongly convex task: the noise differences cancel in the network sum, so LPPA
    ends at noise-free DSGT's model (the exact optimum); i.i.d. noise of the same scale does not."""
    task = decor_least_squares(8, 3, np.random.default_rng(0))
    weights = sinkhorn_knopp(directed)
    config = DSGDConfig(steps=3000, step_size=StepSize(0.05), eval_every=3000)
    plain = run_dsgt(task, weights, config).params
    np.testing.assert_allclose(plain, np.tile(task.optimum, (8, 1)), atol=1e-10)
    lppa = run_dsgt(
        task, weights, config, lppa_noise(directed, 1.0, every_round=every_round), seed=4
    ).params
    dp = run_dsgt(task, weights, config, dp_noise(8, 1.0, every_round=every_round), seed=4).params
    if every_round:
        # fresh zero-sum noise every round keeps the models near, not at, the optimum; the network
        # average stays unbiased, while DP noise moves it
        assert (
            np.abs(lppa.mean(axis=0) - task.optimum).max()
            < 0.2 * np.abs(dp.mean(axis=0) - task.optimum).max()
        )
    else:
        np.testing.assert_allclose(lppa, plain, atol=1e-10)
        assert np.abs(dp - plain).max() > 1e-2


def test_dsgt_rejects_bad_mixing_and_mismatched_noise(directed: nx.DiGraph) -> None:
    task = decor_least_squares(8, 3, np.random.default_rng(0))
    config = DSGDConfig(steps=5, step_size=StepSize(0.05))
    row_only = nx.to_numpy_array(directed).T + np.eye(8)
    row_only /= row_only.sum(axis=1, keepdims=True)
    with pytest.raises(MixingMatrixError, match="doubly stochastic"):
        run_dsgt(task, row_only, config)
    with pytest.raises(ConfigError, match="for 5 agents"):
        run_dsgt(task, sinkhorn_knopp(directed), config, dp_noise(5, 1.0))
    with pytest.raises(ConfigError, match="scale must be"):
        lppa_noise(directed, 0.0)
    with pytest.raises(ConfigError, match="unknown noise distribution"):
        dp_noise(8, 1.0, "cauchy")


def test_gaussian_noise_flow_gives_no_privacy_against_the_eavesdropper_or_a_neighbour() -> None:
    graph = erdos_renyi(10, 0.5, seed=0)
    calibration = calibrate(10.0, 1e-5, 100, AgentLevel(0.1), "exact")
    flow = design_noise_flow(graph, calibration)
    ldp = build_mechanism("ldp", graph, metropolis_hastings(graph), calibration)
    assert np.diag(flow.covariance()).min() >= ldp.private_variances[0] * (1 - 1e-12)
    assert account(ldp, Eavesdropper(), AgentLevel(0.1), 100, 1e-5).epsilon <= 10.0
    for threat in (Eavesdropper(), Colluding(1)):
        assert account(flow, threat, AgentLevel(0.1), 100, 1e-5).epsilon == math.inf
    np.testing.assert_allclose(
        flow.covariance(), lppa_noise(graph, flow.sigma, "gaussian").covariance(), atol=1e-12
    )


def test_one_directed_graph_for_every_seed_with_a_graph_seed() -> None:
    """``--graph er-directed --graph-seed 0`` (LPPA's topology): every replicate trains on the
    strongly connected directed G(n, p) of seed 0; without it each seed draws its own."""
    config = TrainConfig(
        task="least-squares", graph="er-directed", n=8, p=0.3, graph_seed=0, mixing="sinkhorn",
        algorithm="dsgt", mechanism="lppa", seeds=(0, 1, 2),
    ).resolved()  # fmt: skip
    expected = sorted(erdos_renyi(8, 0.3, 0, directed=True).edges())
    for seed in config.seeds:
        graph = build_job(config, seed).graph
        assert graph.is_directed() and sorted(graph.edges()) == expected
    drawn = replace(config, graph_seed=None)
    assert len({tuple(sorted(build_job(drawn, s).graph.edges())) for s in range(3)}) > 1
    for fixed in ("ring", "florentine", "facebook-ego-414", "edgelist:graph.txt"):
        # a topology no seed draws: the seed would change nothing, so it is refused by name
        with pytest.raises(ConfigError, match=rf"--graph-seed\) 0: graph '{fixed}' is not drawn"):
            replace(config, graph=fixed, mixing="metropolis-hastings").resolved()
    assert replace(config, graph="er", mixing="metropolis-hastings").resolved().graph_seed == 0


def test_no_clipping_is_for_gradient_tracking_alone() -> None:
    """``--clip inf`` runs DSGT without clipping (its injection is not calibrated); D-SGD's
    mechanisms are accounted for a threshold, so it is refused there, and NaN everywhere."""
    tracking = TrainConfig(algorithm="dsgt", mechanism="dp", clip=math.inf, n=5, steps=3)
    assert build_job(tracking.resolved(), 0).dsgd.clip is None
    with pytest.raises(ConfigError, match=r"clip \(--clip\) inf"):
        TrainConfig(mechanism="none", clip=math.inf).resolved()
    with pytest.raises(ConfigError, match="clip"):
        TrainConfig(algorithm="dsgt", mechanism="dp", clip=math.nan)


def test_a_run_without_calibrated_noise_states_no_privacy_target() -> None:
    """A run's summary names the budget its noise was calibrated to, and none where nothing was
    calibrated: no noise (its reports say eps = inf), or gradient tracking's injection (no
    report); the --eps it was given is not a promise there."""
    base = TrainConfig(task="quadratic", n=4, steps=10, eval_every=10, eps=3.0)
    cases = {
        "ldp": (base, 3.0),
        "none": (replace(base, mechanism="none"), None),
        "lppa": (replace(base, mechanism="lppa", algorithm="dsgt"), None),
    }
    for name, (config, target) in cases.items():
        result = run_training(config)
        summary = result.summary()
        assert (summary["eps_target"], summary["delta"]) == (
            (target, None if target is None else 1e-5)
        ), name
    assert all(r.epsilon == math.inf for r in run_training(cases["none"][0]).runs[0].privacy)


def test_a_length_in_epochs_is_the_run_of_its_steps_evaluated_every_epoch() -> None:
    """``--epochs E``: E epochs of the mean agent's data, ceil(mean examples / batch) steps each,
    an evaluation after each; the run is the one of those steps given as steps, bit for bit, and
    states them (epochs unset: it replays as it ran). Given beside steps or eval_every, with
    cyclic batches, or for a full-gradient task, it is one error naming the conflict."""
    config = TrainConfig(task="logreg-a9a", n=4, mechanism="ldp", batch_size=512, epochs=2)
    task = build_task("logreg-a9a", 4, 0, config.task_options)
    epoch = -(-(int(task.agent_sizes.sum()) // 4) // 512)
    result = run_training(config)
    assert (result.config.steps, result.config.eval_every) == (2 * epoch, epoch)
    assert result.config.epochs is None and epoch > 1
    assert [record["step"] for record in result.runs[0].history] == [0, epoch, 2 * epoch]
    in_steps = replace(config, epochs=None, steps=2 * epoch, eval_every=epoch)
    assert run_training(in_steps).runs[0].history == result.runs[0].history
    assert result.runs[0].privacy[0].steps == 2 * epoch  # accounted over the steps it ran
    for wrong, message in [
        ({"steps": 100}, r"give it or steps \(--steps\), not both"),
        ({"eval_every": 5}, r"give it or eval_every \(--eval-every\), not both"),
        ({"mechanism": "mafalda", "clip_level": "example"}, "its length is passes x cycle"),
    ]:
        with pytest.raises(ConfigError, match=message):
            replace(config, **wrong).resolved()
    with pytest.raises(ConfigError, match="takes full gradients, it has no examples"):
        run_training(TrainConfig(task="quadratic", n=4, epochs=1))
    with pytest.raises(ConfigError, match="resolve the length first"):
        build_job(config.resolved(), 0)
