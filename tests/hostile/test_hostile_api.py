"""Hostile calls of the Python API: each case is a misuse a user can make of ``dpdl.fit``,
``dpdl.design_noise``, the settings classes, graphs and mixing matrices, the accountant and the
engine. Every one must raise a :class:`~dpdl.errors.DpdlError` subclass (never a raw numpy, scipy
or torch exception) whose message names the bad argument, before any training."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import pytest
import torch
from torch import nn

import dpdl
from dpdl.accounting import AgentLevel, ExampleLevel, account, calibrate
from dpdl.errors import (
    ConfigError,
    DpdlError,
    GraphError,
    MixingMatrixError,
    PrivacyParameterError,
)
from dpdl.graphs import build_graph, mixing_matrix
from dpdl.graphs.mixing import validate_mixing_matrix
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.engine import DSGDConfig, StepSize
from dpdl.mechanisms.registry import build_mechanism
from dpdl.settings import DesignOptions, TaskOptions, TrackingOptions
from dpdl.simulation.dsgd import run_dsgd
from dpdl.tasks.quadratic import decor_least_squares
from dpdl.threats import Eavesdropper

pytestmark = pytest.mark.hostile

RING = nx.cycle_graph(4)
W = mixing_matrix(RING, "metropolis-hastings")
AGENT = AgentLevel(0.1)
BUDGET_100 = calibrate(5.0, 1e-5, 100, AGENT)
LDP_100 = build_mechanism("ldp", RING, W, BUDGET_100)
NAN = float("nan")

X = np.random.default_rng(0).standard_normal((40, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64)


def _loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(outputs, targets, reduction="none")


def _fit(**changes: Any) -> Any:
    """``dpdl.fit`` of a tiny model on 4 agents with ``changes`` to its arguments."""
    kwargs: dict[str, Any] = {
        "model": nn.Linear(3, 2),
        "loss": _loss,
        "train": (X, Y),
        "test": (X, Y),
        "graph": RING,
        "mechanism": "ldp",
        "eps": 5.0,
        "steps": 3,
        "clip": 0.1,
        "batch_size": 4,
    }
    kwargs.update(changes)
    return dpdl.fit(**kwargs)


def _design(**changes: Any) -> Any:
    kwargs: dict[str, Any] = {
        "graph": RING,
        "mechanism": "ldp",
        "eps": 5.0,
        "delta": 1e-5,
        "steps": 10,
        "neighbouring": AGENT,
    }
    kwargs.update(changes)
    return dpdl.design_noise(**kwargs)


def _task() -> Any:
    """DECOR's least squares on four agents, three coordinates."""
    return decor_least_squares(4, 3, np.random.default_rng(0))


def _run(weights: Any = W, mechanism: Any = LDP_100, **config: Any) -> Any:
    settings: dict[str, Any] = {"steps": 3, "step_size": StepSize(0.01), "clip": 0.1}
    settings.update(config)
    return run_dsgd(_task(), weights, mechanism, DSGDConfig(**settings))


def _matrix(change: Callable[[np.ndarray], Any]) -> Any:
    weights = W.copy()
    return change(weights)


def _set(weights: np.ndarray, index: tuple[int, int], value: float) -> np.ndarray:
    weights[index] = value
    return weights


def _overlapping(targets: np.ndarray, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    return [np.arange(10)] * n


# name -> (call, the DpdlError subclass expected, a word the message must contain)
CASES: dict[str, tuple[Callable[[], Any], type[DpdlError], str]] = {
    # the accountant and calibration
    "calibrate-eps-zero": (lambda: calibrate(0.0, 1e-5, 10, AGENT), PrivacyParameterError, "eps"),
    "calibrate-eps-nan": (lambda: calibrate(NAN, 1e-5, 10, AGENT), PrivacyParameterError, "eps"),
    "calibrate-eps-inf": (lambda: calibrate(np.inf, 1e-5, 10, AGENT), PrivacyParameterError, "eps"),
    "calibrate-eps-huge": (lambda: calibrate(1e308, 1e-5, 10, AGENT), PrivacyParameterError, "eps"),
    "calibrate-eps-string": (
        lambda: calibrate("10", 1e-5, 10, AGENT),
        PrivacyParameterError,
        "eps",
    ),
    "calibrate-delta-zero": (
        lambda: calibrate(1.0, 0.0, 10, AGENT),
        PrivacyParameterError,
        "delta",
    ),
    "calibrate-delta-one": (lambda: calibrate(1.0, 1.0, 10, AGENT), PrivacyParameterError, "delta"),
    "calibrate-delta-nan": (lambda: calibrate(1.0, NAN, 10, AGENT), PrivacyParameterError, "delta"),
    "calibrate-steps-zero": (
        lambda: calibrate(1.0, 1e-5, 0, AGENT),
        PrivacyParameterError,
        "steps",
    ),
    "calibrate-steps-fraction": (
        lambda: calibrate(1.0, 1e-5, 2.5, AGENT),
        PrivacyParameterError,
        "steps",
    ),
    "calibrate-steps-string": (
        lambda: calibrate(1.0, 1e-5, "10", AGENT),
        PrivacyParameterError,
        "steps",
    ),
    "calibrate-steps-bool": (
        lambda: calibrate(1.0, 1e-5, True, AGENT),
        PrivacyParameterError,
        "steps",
    ),
    "calibrate-method-unknown": (
        lambda: calibrate(1.0, 1e-5, 10, AGENT, "guess"),
        ConfigError,
        "guess",
    ),
    "calibrate-neighbouring-number": (
        lambda: calibrate(1.0, 1e-5, 10, 0.1),
        ConfigError,
        "neighbouring",
    ),
    "agent-level-clip-zero": (lambda: AgentLevel(0.0), PrivacyParameterError, "clip"),
    "agent-level-clip-nan": (lambda: AgentLevel(NAN), PrivacyParameterError, "clip"),
    "agent-level-clip-negative": (lambda: AgentLevel(-1.0), PrivacyParameterError, "clip"),
    "example-level-batch-zero": (lambda: ExampleLevel(1.0, 0, 0.5), PrivacyParameterError, "batch"),
    "example-level-rate-zero": (lambda: ExampleLevel(1.0, 8, 0.0), PrivacyParameterError, "rate"),
    "example-level-rate-above-one": (
        lambda: ExampleLevel(1.0, 8, 1.5),
        PrivacyParameterError,
        "rate",
    ),
    "account-steps-zero": (
        lambda: account(LDP_100, Eavesdropper(), AGENT, 0, 1e-5),
        PrivacyParameterError,
        "steps",
    ),
    "account-steps-fraction": (
        lambda: account(LDP_100, Eavesdropper(), AGENT, 10.5, 1e-5),
        PrivacyParameterError,
        "steps",
    ),
    "account-delta-zero": (
        lambda: account(LDP_100, Eavesdropper(), AGENT, 10, 0.0),
        PrivacyParameterError,
        "delta",
    ),
    "account-delta-string": (
        lambda: account(LDP_100, Eavesdropper(), AGENT, 10, "small"),
        PrivacyParameterError,
        "delta",
    ),
    # graphs
    "build-graph-ring-two": (lambda: build_graph("ring", 2), GraphError, "ring"),
    "build-graph-ring-no-n": (lambda: build_graph("ring"), DpdlError, "n"),
    "build-graph-unknown": (lambda: build_graph("hypercube", 8), GraphError, "hypercube"),
    "build-graph-torus-prime": (lambda: build_graph("torus", 7), GraphError, "torus"),
    "build-graph-complete-zero": (lambda: build_graph("complete", 0), GraphError, "0"),
    "build-graph-star-negative": (lambda: build_graph("star", -1), GraphError, "-1"),
    "build-graph-er-p-big": (lambda: build_graph("er", 10, 1.5), GraphError, "p"),
    "build-graph-er-p-nan": (lambda: build_graph("er", 10, NAN), GraphError, "p"),
    "build-graph-n-fraction": (lambda: build_graph("ring", 4.5), GraphError, "4.5"),
    "build-graph-missing-file": (
        lambda: build_graph("edgelist:/no/such/file.txt"),
        GraphError,
        "not found",
    ),
    "build-graph-spec-number": (lambda: build_graph(5), GraphError, "5"),
    # mixing matrices
    "mixing-rule-unknown": (lambda: mixing_matrix(RING, "uniform"), MixingMatrixError, "uniform"),
    "mixing-disconnected": (
        lambda: mixing_matrix(nx.union(RING, nx.cycle_graph(range(4, 8))), "metropolis-hastings"),
        DpdlError,
        "disconnected",
    ),
    "validate-not-square": (
        lambda: validate_mixing_matrix(np.ones((3, 4)) / 4),
        MixingMatrixError,
        "square",
    ),
    "validate-empty": (
        lambda: validate_mixing_matrix(np.zeros((0, 0))),
        MixingMatrixError,
        "empty",
    ),
    "validate-three-d": (
        lambda: validate_mixing_matrix(np.ones((2, 2, 2))),
        MixingMatrixError,
        "square",
    ),
    "validate-nan": (
        lambda: validate_mixing_matrix(_matrix(lambda w: _set(w, (1, 2), NAN))),
        MixingMatrixError,
        "(1, 2)",
    ),
    "validate-negative": (
        lambda: validate_mixing_matrix(
            _matrix(lambda w: _set(_set(w, (0, 0), w[0, 0] + 0.5), (0, 1), w[0, 1] - 0.5))
        ),
        MixingMatrixError,
        "(0, 1)",
    ),
    "validate-rows": (
        lambda: validate_mixing_matrix(_matrix(lambda w: _set(w, (2, 2), w[2, 2] + 0.3))),
        MixingMatrixError,
        "row 2",
    ),
    "validate-columns": (
        lambda: validate_mixing_matrix(np.array([[0.5, 0.5], [1.0, 0.0]])),
        MixingMatrixError,
        "column",
    ),
    "validate-strings": (
        lambda: validate_mixing_matrix([["a", "b"], ["c", "d"]]),
        MixingMatrixError,
        "numbers",
    ),
    "validate-ragged": (
        lambda: validate_mixing_matrix([[1.0], [0.5, 0.5]]),
        MixingMatrixError,
        "numbers",
    ),
    "validate-identity-does-not-mix": (
        lambda: validate_mixing_matrix(np.eye(4)),
        MixingMatrixError,
        "mix",
    ),
    "validate-wrong-size-for-graph": (
        lambda: validate_mixing_matrix(np.full((3, 3), 1 / 3), RING),
        MixingMatrixError,
        "4 nodes",
    ),
    "validate-support-off-graph": (
        lambda: validate_mixing_matrix(np.full((4, 4), 0.25), RING),
        MixingMatrixError,
        "edge",
    ),
    # settings classes
    "train-config-steps-fraction": (lambda: TrainConfig(steps=2.5), ConfigError, "steps"),
    "train-config-steps-string": (lambda: TrainConfig(steps="10"), ConfigError, "steps"),
    "train-config-eps-negative": (lambda: TrainConfig(eps=-1.0), ConfigError, "eps"),
    "train-config-eps-nan": (lambda: TrainConfig(eps=NAN), ConfigError, "eps"),
    "train-config-delta-one": (lambda: TrainConfig(delta=1.0), ConfigError, "delta"),
    "train-config-clip-zero": (lambda: TrainConfig(clip=0.0), ConfigError, "clip"),
    "train-config-lr-zero": (lambda: TrainConfig(lr=0.0), ConfigError, "lr"),
    "train-config-p-negative": (lambda: TrainConfig(p=-0.5), ConfigError, "p"),
    "train-config-n-zero": (lambda: TrainConfig(n=0), ConfigError, "n"),
    "train-config-batch-zero": (lambda: TrainConfig(batch_size=0), ConfigError, "batch_size"),
    "train-config-eval-zero": (lambda: TrainConfig(eval_every=0), ConfigError, "eval_every"),
    "train-config-seed-twice": (lambda: TrainConfig(seeds=(1, 1)), ConfigError, "seeds"),
    "train-config-seed-negative": (lambda: TrainConfig(seeds=(-1,)), ConfigError, "seeds"),
    "train-config-seed-string": (lambda: TrainConfig(seeds="0"), ConfigError, "seeds"),
    "train-config-task-unknown": (lambda: TrainConfig(task="imagenet"), ConfigError, "task"),
    "train-config-mixing-unknown": (lambda: TrainConfig(mixing="uniform"), ConfigError, "mixing"),
    "train-config-design-other-mechanism": (
        lambda: TrainConfig(design=DesignOptions(groups=2)),
        ConfigError,
        "groups",
    ),
    "train-config-tracking-without-dsgt": (
        lambda: TrainConfig(tracking=TrackingOptions(every_round=True)),
        ConfigError,
        "every_round",
    ),
    "train-config-design-dict": (lambda: TrainConfig(design={"groups": 2}), ConfigError, "design"),
    "task-options-alpha-negative": (lambda: TaskOptions(alpha=-1.0), ConfigError, "alpha"),
    "task-options-l2-negative": (lambda: TaskOptions(l2=-1.0), ConfigError, "l2"),
    "task-options-test-fraction": (
        lambda: TaskOptions(test_fraction=1.5),
        ConfigError,
        "test_fraction",
    ),
    "task-options-partition-unknown": (
        lambda: TaskOptions(partition="random"),
        ConfigError,
        "partition",
    ),
    "task-options-labels-zero": (
        lambda: TaskOptions(labels_per_agent=0),
        ConfigError,
        "labels_per_agent",
    ),
    "design-search-template-without-parameter": (
        lambda: DesignOptions(decor_search="appendix-d-"),
        ConfigError,
        "decor_search",
    ),
    "design-search-empty": (lambda: DesignOptions(decor_search=""), ConfigError, "decor_search"),
    "design-q-zero": (lambda: DesignOptions(q=0), ConfigError, "q"),
    "design-groups-zero": (lambda: DesignOptions(groups=0), ConfigError, "groups"),
    "design-search-unknown": (lambda: DesignOptions(decor_search="grid"), ConfigError, "grid"),
    "tracking-scale-zero": (lambda: TrackingOptions(scale=0.0), ConfigError, "scale"),
    "tracking-scale-nan": (lambda: TrackingOptions(scale=NAN), ConfigError, "scale"),
    "tracking-distribution-unknown": (
        lambda: TrackingOptions(distribution="cauchy"),
        ConfigError,
        "cauchy",
    ),
    # mechanisms
    "build-mechanism-unknown": (
        lambda: build_mechanism("laplace", RING, W, BUDGET_100),
        ConfigError,
        "laplace",
    ),
    "build-mechanism-no-budget": (
        lambda: build_mechanism("ldp", RING, W, None),
        ConfigError,
        "budget",
    ),
    "build-mechanism-option-not-read": (
        lambda: build_mechanism("ldp", RING, W, BUDGET_100, DesignOptions(groups=2)),
        ConfigError,
        "groups",
    ),
    "build-mechanism-more-groups-than-agents": (
        lambda: build_mechanism("whisper-multiseed", RING, W, BUDGET_100, DesignOptions(groups=9)),
        ConfigError,
        "groups",
    ),
    # the engine: the mechanism's calibration and the mixing matrix
    "run-more-steps-than-calibrated": (lambda: _run(steps=1000), PrivacyParameterError, "steps"),
    "run-other-clip-than-calibrated": (lambda: _run(clip=1.0), PrivacyParameterError, "clip"),
    "run-without-clip": (lambda: _run(clip=None), PrivacyParameterError, "clip"),
    "run-example-level-agent-calibration": (
        lambda: _run(clip_level="example", sampling="poisson"),
        PrivacyParameterError,
        "example",
    ),
    "run-weights-not-stochastic": (
        lambda: _run(weights=_matrix(lambda w: w * 2)),
        MixingMatrixError,
        "row 0",
    ),
    "run-weights-nan": (
        lambda: _run(weights=_matrix(lambda w: _set(w, (3, 3), NAN))),
        MixingMatrixError,
        "(3, 3)",
    ),
    "run-weights-wrong-shape": (lambda: _run(weights=np.eye(3)), ConfigError, "3"),
    "run-mechanism-other-n": (
        lambda: _run(
            mechanism=build_mechanism(
                "ldp", nx.cycle_graph(5), mixing_matrix(nx.cycle_graph(5)), BUDGET_100
            )
        ),
        ConfigError,
        "5 agents",
    ),
    "dsgd-config-steps-fraction": (
        lambda: DSGDConfig(steps=2.5, step_size=StepSize(0.1)),
        ConfigError,
        "steps",
    ),
    "dsgd-config-clip-nan": (
        lambda: DSGDConfig(steps=2, step_size=StepSize(0.1), clip=NAN),
        ConfigError,
        "clip",
    ),
    "dsgd-config-clip-level-unknown": (
        lambda: DSGDConfig(steps=2, step_size=StepSize(0.1), clip_level="batch"),
        ConfigError,
        "batch",
    ),
    "dsgd-config-eval-zero": (
        lambda: DSGDConfig(steps=2, step_size=StepSize(0.1), eval_every=0),
        ConfigError,
        "eval_every",
    ),
    "step-size-zero": (lambda: StepSize(0.0), ConfigError, "step size"),
    "step-size-schedule-unknown": (lambda: StepSize(0.1, "cosine"), ConfigError, "cosine"),
    # dpdl.fit
    "fit-model-not-module": (lambda: _fit(model=lambda x: x), ConfigError, "model"),
    "fit-train-three-parts": (lambda: _fit(train=(X, Y, Y)), ConfigError, "train"),
    "fit-train-lengths-differ": (lambda: _fit(train=(X, Y[:10])), ConfigError, "train"),
    "fit-train-nan": (
        lambda: _fit(train=(np.full_like(X, np.nan), Y)),
        ConfigError,
        "NaN",
    ),
    "fit-train-empty": (lambda: _fit(train=(X[:0], Y[:0])), ConfigError, "train"),
    "fit-train-wrong-type": (lambda: _fit(train="data.csv"), ConfigError, "train"),
    "fit-graph-wrong-type": (lambda: _fit(graph=4), ConfigError, "graph"),
    "fit-graph-disconnected": (
        lambda: _fit(graph=nx.union(RING, nx.cycle_graph(range(4, 8)))),
        DpdlError,
        "disconnected",
    ),
    "fit-matrix-not-stochastic": (
        lambda: _fit(graph=_matrix(lambda w: w * 2)),
        MixingMatrixError,
        "row 0",
    ),
    "fit-matrix-nan": (
        lambda: _fit(graph=_matrix(lambda w: _set(w, (0, 1), NAN))),
        MixingMatrixError,
        "(0, 1)",
    ),
    "fit-matrix-not-square": (lambda: _fit(graph=np.ones((4, 3)) / 3), MixingMatrixError, "square"),
    "fit-mechanism-unknown": (lambda: _fit(mechanism="laplace"), ConfigError, "laplace"),
    "fit-no-eps": (lambda: _fit(eps=None), ConfigError, "eps"),
    "fit-eps-zero": (lambda: _fit(eps=0.0), PrivacyParameterError, "eps"),
    "fit-delta-one": (lambda: _fit(delta=1.0), PrivacyParameterError, "delta"),
    "fit-steps-zero": (lambda: _fit(steps=0), ConfigError, "steps"),
    "fit-steps-fraction": (lambda: _fit(steps=2.5), ConfigError, "steps"),
    "fit-clip-zero": (lambda: _fit(clip=0.0), DpdlError, "clip"),
    "fit-clip-level-unknown": (lambda: _fit(clip_level="batch"), ConfigError, "batch"),
    "fit-lr-negative": (lambda: _fit(lr=-0.1), ConfigError, "step size"),
    "fit-schedule-unknown": (lambda: _fit(schedule="cosine"), ConfigError, "cosine"),
    "fit-batch-zero": (lambda: _fit(batch_size=0), DpdlError, "batch"),
    "fit-partition-unknown": (lambda: _fit(partition="random"), ConfigError, "random"),
    "fit-partition-overlapping": (lambda: _fit(partition=_overlapping), ConfigError, "overlap"),
    "fit-partition-too-few-parts": (
        lambda: _fit(partition=[np.arange(10), np.arange(10, 20)]),
        ConfigError,
        "parts",
    ),
    "fit-partition-out-of-range": (
        lambda: _fit(partition=[np.arange(i * 10, i * 10 + 10) + 5 for i in range(4)]),
        ConfigError,
        "indices",
    ),
    "fit-partition-float-indices": (
        lambda: _fit(partition=[np.arange(i * 10, i * 10 + 10) * 1.0 for i in range(4)]),
        ConfigError,
        "integer",
    ),
    "fit-alpha-negative": (lambda: _fit(partition="dirichlet", alpha=-1.0), ConfigError, "alpha"),
    "fit-mixing-unknown": (lambda: _fit(mixing="uniform"), MixingMatrixError, "uniform"),
    "fit-calibration-unknown": (lambda: _fit(calibration="guess"), ConfigError, "guess"),
    "fit-design-not-read": (lambda: _fit(design=DesignOptions(q=2)), ConfigError, "q"),
    "fit-threat-unknown": (lambda: _fit(threats=["aliens"]), ConfigError, "aliens"),
    "fit-eval-every-zero": (lambda: _fit(eval_every=0), ConfigError, "eval_every"),
    "fit-mechanism-calibrated-for-fewer-steps": (
        lambda: _fit(mechanism=LDP_100, steps=1000),
        PrivacyParameterError,
        "steps",
    ),
    "fit-mechanism-calibrated-for-other-clip": (
        lambda: _fit(mechanism=LDP_100, clip=1.0),
        PrivacyParameterError,
        "clip",
    ),
    "fit-mechanism-other-n": (
        lambda: _fit(
            mechanism=build_mechanism(
                "ldp", nx.cycle_graph(5), mixing_matrix(nx.cycle_graph(5)), BUDGET_100
            )
        ),
        ConfigError,
        "5 agents",
    ),
    # dpdl.design_noise
    "design-noise-mechanism-unknown": (
        lambda: _design(mechanism="laplace"),
        ConfigError,
        "laplace",
    ),
    "design-noise-eps-zero": (lambda: _design(eps=0.0), PrivacyParameterError, "eps"),
    "design-noise-steps-fraction": (lambda: _design(steps=0.5), PrivacyParameterError, "steps"),
    "design-noise-neighbouring-number": (
        lambda: _design(neighbouring=1.0),
        ConfigError,
        "neighbouring",
    ),
    "design-noise-graph-name-unknown": (
        lambda: _design(graph="hypercube", n=8),
        GraphError,
        "hypercube",
    ),
    "design-noise-threat-unknown": (lambda: _design(threats=["aliens"]), ConfigError, "aliens"),
}


@pytest.mark.parametrize("name", CASES)
def test_api_misuse_is_a_dpdl_error(name: str) -> None:
    call, expected, keyword = CASES[name]
    with pytest.raises(DpdlError) as caught:
        call()
    assert isinstance(caught.value, expected), f"{type(caught.value).__name__}: {caught.value}"
    assert keyword.lower() in str(caught.value).lower(), str(caught.value)


def test_value_and_type_errors_keep_their_natural_bases() -> None:
    """Code that catches ValueError (a bad value) keeps working with dpdl's errors."""
    for error in (ConfigError, GraphError, MixingMatrixError, PrivacyParameterError):
        assert issubclass(error, ValueError)


def test_a_mechanism_remembers_its_calibration() -> None:
    """What the engine checks a run against is the budget the noise was built for."""
    assert LDP_100.calibration is BUDGET_100
    assert LDP_100.calibration.steps == 100 and LDP_100.calibration.neighbouring == AGENT


def test_fewer_steps_than_calibrated_are_allowed() -> None:
    """Running fewer steps than the noise was sized for spends less privacy: not an error."""
    assert _run(steps=3).params.shape[0] == 4
