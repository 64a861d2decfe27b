"""Noise correlated over time as a training job (``dpdl train --mechanism dp-dsgd | antipgd |
mafalda | mafalda-l``): the run the engine's parts give put together by hand, a guarantee checked
against an independent computation, a replayable command line, and what a job of this kind
costs."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dpdl.accounting import gdp
from dpdl.cli import main
from dpdl.errors import ConfigError
from dpdl.experiments.train import build_job, run_training
from dpdl.factorization.mafalda import (
    agent_utility_grams,
    gdp_noise_multiplier,
    local_sensitivity,
    noise_multiplier,
    optimize_agents,
    optimize_local,
    utility_gram,
)
from dpdl.factorization.participation import Participation
from dpdl.graphs import NotDoublyStochasticWarning, build_graph, mixing_matrix
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.engine import DSGDConfig, StepSize
from dpdl.jobspec.factorized import encoder_for, with_gdp_budget
from dpdl.jobspec.resources import estimate, job_sizes
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise
from dpdl.settings import TaskOptions
from dpdl.simulation import run_dsgd
from dpdl.tasks import build_task

METHODS = ("dp-dsgd", "antipgd", "mafalda", "mafalda-l")


def _config(mechanism: str, **changes) -> TrainConfig:
    """A MAFALDA-SGD Housing job of the reproductions' protocol (iid Housing, per-example clipping
    at 1, cyclic batches), small: the Florentine families, 24 steps in cycles of 8 batches."""
    settings = {
        "task": "housing-mlp",
        "graph": "florentine",
        "mechanism": mechanism,
        "clip_level": "example",
        "steps": 24,
        "cycle": 8,
        "lr": 0.1,
        "clip": 1.0,
        "eps": 3.0,
        "delta": 1e-6,
        "eval_every": 24,
        "seeds": (3,),
        "task_options": TaskOptions(partition="iid", l2=0.0),  # MAFALDA-SGD's Housing setting
    }
    return TrainConfig(**{**settings, **changes})


def _gdp_epsilon(mu: float, delta: float) -> float:
    """eps of mu-GDP at delta from the Gaussian mechanism's exact privacy profile (Balle and Wang
    2018, Theorem 8), solved by scipy: independent of :mod:`dpdl.accounting.gdp`."""

    def excess(eps: float) -> float:
        profile = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        return profile - delta

    return brentq(excess, 0.0, 100.0, xtol=1e-14, rtol=1e-14)


def _assembled(method: str, config: TrainConfig) -> dict:
    """The run of ``config`` put together by hand from the engine's parts, without the job spec:
    graph, Metropolis-Hastings gossip, task, encoder, the noise multiplier for the batch mean's
    sensitivity ``2 C / m``, D-SGD on cyclic batches (the MAFALDA reproductions' run before
    ``dpdl train`` ran it)."""
    graph = build_graph(config.graph)
    weights = mixing_matrix(graph, config.mixing)
    seed = config.seeds[0]
    task = build_task(config.task, graph.number_of_nodes(), seed, config.task_options)
    steps, cycle = config.steps, config.cycle
    participation = Participation.cyclic(steps, -(-steps // cycle), cycle)
    local = np.eye(steps) if method in ("dp-dsgd", "none") else None
    if method == "antipgd":
        local = np.tril(np.ones((steps, steps)))
    elif method == "mafalda":
        local = optimize_local(utility_gram(weights, steps), participation).encoder
    elif method == "mafalda-l":
        grams = agent_utility_grams(weights, steps)
        local = np.stack([result.encoder for result in optimize_agents(grams, participation)])
    add_remove = config.neighbouring == "add-remove"
    row = (1.0 if add_remove else 2.0) * config.clip / int(task.agent_sizes.min() // cycle)
    if method == "none":
        sigma = 0.0
    elif config.gdp_mu is not None:  # the MAFALDA-SGD code's noise: (C / m) sens / mu
        sigma = gdp_noise_multiplier(local, participation, row, config.gdp_mu, config.delta)
    else:
        sigma = noise_multiplier(local, participation, row, config.eps, config.delta)
    noise = LocalCorrelatedNoise(graph.number_of_nodes(), local, sigma, method)
    dsgd = DSGDConfig(
        steps,
        StepSize(config.lr),
        clip=config.clip,
        clip_level="example",
        sampling="cyclic",
        cycle=cycle,
        eval_every=steps,
        fixed_divisor=add_remove,
    )
    final = run_dsgd(task, weights, noise, dsgd, seed=seed).final_metrics
    mu = math.inf if sigma == 0 else row * local_sensitivity(local, participation) / sigma
    return {**final, "sigma": sigma, "mu": mu}


#: The MAFALDA-SGD code's protocol as options: a mu-GDP budget, add / remove, its gossip.
AUTHORS = {"gdp_mu": 0.7, "neighbouring": "add-remove", "mixing": "local-degree"}


@pytest.mark.parametrize("authors", [False, True], ids=["dpdl", "authors"])
@pytest.mark.parametrize("method", [*METHODS, "none"])
def test_train_is_the_run_assembled_by_hand(method: str, authors: bool) -> None:
    """``dpdl train`` (the job spec) runs what the engine's parts give put together by hand: the
    same noise multiplier, guarantee and final metrics, bit for bit; ``none`` with a cycle is the
    MAFALDA figures' non-private reference, the same batches without noise (eps infinite). The
    same for the authors' protocol (a mu budget, add / remove with each batch's sum divided by its
    agent's smallest batch, their gossip)."""
    changes = {**AUTHORS, "eps": TrainConfig.eps} if authors else {}
    if authors and method == "none":
        changes["gdp_mu"] = None
    config = _config(method, **changes)
    # their gossip is row-stochastic only: the warning's test is in tests/graphs/test_graphs.py
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotDoublyStochasticWarning)
        reference = _assembled(method, config.resolved())
        result = run_training(config)
    summary = result.summary()
    assert summary["noise"].get("sigma", 0.0) == reference["sigma"]
    assert summary["privacy"][0]["epsilon"] == gdp.epsilon(reference["mu"], config.delta)
    for key in ("test_loss", "test_loss_average_model", "consensus_distance"):
        assert summary[key] == reference[key], key
    if authors:  # every agent's own final loss is kept beside the mean (node 0's: their figures')
        agents = result.runs[0].agent_metrics["test_loss"]
        assert len(agents) == 15 and np.mean(agents) == pytest.approx(reference["test_loss"])


@pytest.mark.parametrize("method", ["dp-dsgd", "antipgd", "mafalda"])
def test_guarantee_against_an_independent_computation(method: str) -> None:
    """The reported eps is that of ``mu = (2 C / m) sens / sigma``-GDP, computed here without
    dpdl's accountant: sens in closed form (DP-D-SGD: ``sqrt(k)``; AntiPGD: ``C^T C`` has the
    positive entries ``T - max(s, s')``, so the worst record takes part at every step of its
    pattern with one sign; MAFALDA: 1, its constraint), m the smallest batch. It meets the target
    and spends it (never above, within 1e-9 below), for both threats."""
    config = _config(method, steps=20, cycle=6).resolved()
    job = build_job(config, 3)
    steps, cycle = config.steps, 6
    patterns = [list(range(offset, steps, cycle)) for offset in range(cycle)]
    if method == "dp-dsgd":
        sensitivity = math.sqrt(max(map(len, patterns)))
    elif method == "antipgd":
        sensitivity = math.sqrt(
            max(sum(steps - max(s, r) for s in pattern for r in pattern) for pattern in patterns)
        )
    else:
        sensitivity = 1.0
    batch = int(job.task.agent_sizes.min()) // cycle
    assert isinstance(job.mechanism, LocalCorrelatedNoise)
    mu = 2.0 * config.clip / batch * sensitivity / job.mechanism.sigma
    expected = _gdp_epsilon(mu, config.delta)
    assert [report.threat for report in job.reports] == ["eavesdropper", "honest-but-curious"]
    for report in job.reports:
        assert report.epsilon == pytest.approx(expected, rel=1e-9)
        assert config.eps - 1e-9 <= report.epsilon <= config.eps
        assert report.mu == pytest.approx(mu, rel=1e-12)


@pytest.mark.parametrize("method", ["dp-dsgd", "mafalda"])
def test_a_gdp_budget_under_add_remove_is_met_exactly(method: str) -> None:
    """``--gdp-mu`` with ``--neighbouring add-remove`` (the MAFALDA-SGD code's budget): sigma is
    ``(C / m) sens / mu`` (sens in closed form: sqrt(k) for DP-D-SGD, 1 for MAFALDA), the mu it
    gives never above the target and within 1e-12 of it, eps that of mu at delta by the
    independent profile, and the configuration states that eps. At one eps, add / remove needs
    half the noise of replace-one."""
    config = with_gdp_budget(
        _config(
            method, steps=20, cycle=6, eps=TrainConfig.eps, gdp_mu=0.5, neighbouring="add-remove"
        ).resolved()
    )
    job = build_job(config, 3)
    assert isinstance(job.mechanism, LocalCorrelatedNoise)
    batch = int(job.task.agent_sizes.min()) // 6
    sensitivity = math.sqrt(4) if method == "dp-dsgd" else 1.0  # k = ceil(20 / 6) = 4 takes
    sigma = job.mechanism.sigma
    assert sigma == pytest.approx(config.clip / batch * sensitivity / 0.5, rel=1e-12)
    mu = config.clip / batch * sensitivity / sigma
    assert 0.5 - 1e-12 <= mu <= 0.5
    assert config.eps == pytest.approx(_gdp_epsilon(0.5, config.delta), rel=1e-9)
    for report in job.reports:
        assert report.epsilon == pytest.approx(_gdp_epsilon(mu, config.delta), rel=1e-9)
        assert report.epsilon <= config.eps
        assert "add or remove one" in report.neighbouring
    replace_one = build_job(_config(method, steps=20, cycle=6, eps=config.eps).resolved(), 3)
    halved = build_job(
        _config(method, steps=20, cycle=6, eps=config.eps, neighbouring="add-remove").resolved(), 3
    )
    assert halved.mechanism.sigma == pytest.approx(replace_one.mechanism.sigma / 2, rel=1e-12)


def test_a_gdp_budget_is_never_overshot_by_rounding() -> None:
    """sigma for a mu budget is ``Delta sens / mu`` to 1e-12, and neither the mu it gives nor that
    mu's eps at delta ever rounds above the budget's: over 708 (batch, mu) pairs, the plain
    division overshoots in 14 (eps 16 ulps over at mu = 0.1 on the Florentine families)."""
    participation = Participation.cyclic(20, 4, 5)
    encoder = np.eye(20)  # DP-D-SGD: sens = sqrt(k) = 2
    raised = 0
    for batch in range(2, 120):
        for mu in (0.1, 0.2, 0.5, 1.0, 2.0, 5.0):
            sensitivity = 2.0 / batch
            sigma = gdp_noise_multiplier(encoder, participation, 1.0 / batch, mu, 1e-6)
            assert sigma == pytest.approx(sensitivity / mu, rel=1e-12)
            assert sensitivity / sigma <= mu
            assert gdp.epsilon(sensitivity / sigma, 1e-6) <= gdp.epsilon(mu, 1e-6)
            raised += sigma != sensitivity / mu
    assert raised > 0  # the plain division would overshoot somewhere


def test_the_authors_options_are_refused_where_they_do_not_apply() -> None:
    """A mu budget and add / remove belong to the time-correlated mechanisms (and their noiseless
    reference); two budgets at once are one error naming both."""
    with pytest.raises(ConfigError, match=r"gdp_mu \(--gdp-mu\) applies to the time-correlated"):
        TrainConfig(mechanism="ldp", gdp_mu=1.0).resolved()
    with pytest.raises(ConfigError, match=r"neighbouring \(--neighbouring\) applies"):
        TrainConfig(mechanism="decor", neighbouring="add-remove").resolved()
    with pytest.raises(ConfigError, match="give one budget"):
        run_training(_config("mafalda", eps=3.0, gdp_mu=1.0))
    with pytest.raises(ConfigError, match="neighbouring"):
        _config("mafalda", neighbouring="swap")
    resolved = with_gdp_budget(_config("mafalda", eps=TrainConfig.eps, gdp_mu=1.0).resolved())
    assert with_gdp_budget(resolved.resolved()) == resolved  # a saved configuration replays


@pytest.mark.parametrize("per_agent", [False, True])
def test_variance_after_mixing_is_the_noise_after_one_gossip(per_agent: bool) -> None:
    """``Tr(W R_t W^T)`` averaged over the steps, against the noise drawn: 20000 coordinates of
    AntiPGD's noise (agent u's scaled by u + 1 where every agent has its own encoder) over 6
    steps, mapped by a random non-symmetric 5 x 5 matrix, squared and averaged."""
    weights = np.random.default_rng(1).random((5, 5))
    encoder = np.tril(np.ones((6, 6)))
    if per_agent:
        encoder = np.stack([encoder * (u + 1) for u in range(5)])
    noise = LocalCorrelatedNoise(5, encoder, sigma=0.7)
    stream = noise.noise_stream(np.random.default_rng(0), 20000)
    draws = np.stack([next(stream) for _ in range(noise.steps)])
    measured = np.mean([np.sum((weights @ step) ** 2, axis=0).mean() for step in draws])
    assert noise.variance_after_mixing(weights) == pytest.approx(measured, rel=0.02)


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("sqrt", []),
        ("bsr", ["--bands", "3"]),
        ("bandmf", []),
        ("bisr", ["--bands", "4"]),
        ("blt", ["--buffer", "2"]),
    ],
)
def test_the_toeplitz_strategies_train(tmp_path, method: str, options: list[str]) -> None:
    """``dpdl train --mechanism sqrt | bsr | bandmf | bisr | blt`` (with their ``--bands`` or
    ``--buffer``): a short run of the Florentine families on Housing, its guarantee the encoder's
    exact sensitivity's (recomputed from the registry's target), within the budget, the options
    saved in the replayable configuration."""
    args = ["train", "--task", "housing-mlp", "--graph", "florentine", "--steps", "24"]
    args += ["--mechanism", method, "--clip-level", "example", "--cycle", "8", "--eps", "3"]
    args += ["--delta", "1e-6", "--partition", "iid", "--l2", "0", "--eval-every", "24"]
    args += ["--lr", "0.1", "--clip", "1", "--no-progress", *options]
    assert main([*args, "--out", str(tmp_path)]) == 0
    final = json.loads((tmp_path / "final.json").read_text())
    assert math.isfinite(final["test_loss"])
    privacy = final["privacy"][0]
    assert 3 - 1e-9 <= privacy["epsilon"] <= 3
    given = {
        key.lstrip("-"): int(value) for key, value in zip(options[::2], options[1::2], strict=True)
    }
    job = build_job(_config(method, **given).resolved(), 3)
    assert isinstance(job.mechanism, LocalCorrelatedNoise)
    encoder = encoder_for(method, job.weights, 24, 8, **given)
    sensitivity = local_sensitivity(encoder, Participation.cyclic(24, 3, 8))
    assert job.mechanism.sensitivity == pytest.approx(sensitivity, rel=1e-12)
    assert final["noise"]["sigma"] == job.mechanism.sigma  # the eps above is this noise's
    if options:
        assert f"{options[0].lstrip('-')} = {options[1]}" in (tmp_path / "config.toml").read_text()


def test_command_line_run_is_replayed(tmp_path, capsys) -> None:
    """``dpdl train --mechanism antipgd``: final.json holds the guarantee of its accountant, the
    command prints it, and config.toml replays the run to the same bytes."""
    args = ["train", "--task", "housing-mlp", "--graph", "ring", "--n", "4", "--steps", "12"]
    args += ["--mechanism", "antipgd", "--clip-level", "example", "--cycle", "4", "--eps", "2"]
    args += ["--partition", "iid", "--l2", "0", "--eval-every", "6", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    final = json.loads((tmp_path / "a" / "final.json").read_text())
    privacy = final["privacy"][0]
    assert privacy["accountant"].startswith("matrix-factorization GDP")
    assert "cyclic (k=3, b=4)" in privacy["neighbouring"]
    assert 2 - 1e-9 <= privacy["epsilon"] <= 2
    assert "matrix-factorization GDP" in err
    replay = ["train", "--config", str(tmp_path / "a" / "config.toml")]
    assert main([*replay, "--out", str(tmp_path / "b")]) == 0
    replayed = (tmp_path / "b" / "final.json").read_bytes()
    assert replayed == (tmp_path / "a" / "final.json").read_bytes()


def test_cost_of_the_encoders_is_estimated() -> None:
    """MAFALDA's encoder is optimised over T x T matrices, about 0.5 T^3 operations an L-BFGS
    iteration: at the default 5000 steps (625 participations, the 2000 iterations' cap) the
    estimate is hours to days, at the reproductions' 320 (measured: 1.3 s) seconds; DP-D-SGD's
    and the square root's fixed encoders cost no optimisation, and MAFALDA-L-SGD holds one per
    agent."""
    long = job_sizes(_config("mafalda", steps=5000, cycle=None).resolved(), (15, 20))
    assert 12 * 3600 < estimate(long).seconds < 3 * 86400
    short = estimate(job_sizes(_config("mafalda", steps=320, cycle=16).resolved(), (15, 20)))
    assert 1 < short.seconds < 60
    fixed = estimate(job_sizes(_config("dp-dsgd", steps=5000, cycle=None).resolved(), (15, 20)))
    assert fixed.seconds < 3600
    shared = estimate(job_sizes(_config("mafalda", steps=320, cycle=16).resolved(), (15, 20)))
    per_agent = estimate(job_sizes(_config("mafalda-l", steps=320, cycle=16).resolved(), (15, 20)))
    # 15 encoders, inverses and utility Grams against one of each: 42 more T x T float64
    assert per_agent.memory - shared.memory == pytest.approx(42 * 8 * 320**2, rel=1e-12)
    # one optimisation per agent: 15 times MAFALDA's over the run of the square root's fixed
    # encoder, whose noise keeps every seed as MAFALDA's does
    plain = estimate(job_sizes(_config("sqrt", steps=320, cycle=16).resolved(), (15, 20)))
    optimisation = shared.seconds - plain.seconds
    assert optimisation > 1
    assert per_agent.seconds - plain.seconds == pytest.approx(15 * optimisation, rel=1e-9)


def test_the_noise_state_and_fit_of_the_toeplitz_strategies_are_estimated() -> None:
    """The estimate keeps each mechanism's noise state (``T n d`` floats for MAFALDA's dense
    encoder, ``d n d`` for a BLT of buffer d, ``(bands - 1) n d`` for BandMF, none for DP-D-SGD),
    and charges BandMF's and BLT's fit to the gossip but not BSR's closed form."""
    sizes = {
        name: job_sizes(_config(name, steps=320, cycle=16, **options).resolved(), (15, 20))
        for name, options in (
            ("mafalda", {}),
            ("blt", {"buffer": 3}),
            ("bandmf", {}),
            ("bsr", {}),
            ("dp-dsgd", {}),
        )
    }
    states = {name: size.noise_state for name, size in sizes.items()}
    assert states == {"mafalda": None, "blt": 3, "bandmf": 15, "bsr": 15, "dp-dsgd": 0}
    terms = {name: estimate(size).terms for name, size in sizes.items()}
    dim = sizes["blt"].shape.dim
    kept = {
        name: next(value for key, value in term.items() if key.startswith("noise state"))
        for name, term in terms.items()
    }
    assert kept["mafalda"] == 8.0 * 320 * 15 * dim and kept["blt"] == 8.0 * 3 * 15 * dim
    seconds = {name: estimate(size).seconds for name, size in sizes.items()}
    assert seconds["bandmf"] > seconds["bsr"] and seconds["blt"] > seconds["bsr"]


def test_a_sweep_point_records_the_encoders_sensitivity() -> None:
    """A point of ``dpdl sweep`` with a time-correlated mechanism records the sensitivity its
    noise is calibrated to (the MAFALDA reports' note reads it): DP-D-SGD's ``sqrt(k)``, k = 3
    participations in 24 steps of cycles of 8."""
    from dpdl.experiments.sweeps.run import run_point
    from dpdl.settings import to_options

    entry = run_point({"options": to_options(_config("dp-dsgd").resolved())})
    assert entry["privacy"]["sensitivity"] == pytest.approx(math.sqrt(3), rel=1e-12)
    plain = run_point({"options": to_options(_config("none", cycle=None, clip_level="agent"))})
    assert "sensitivity" not in plain["privacy"]
