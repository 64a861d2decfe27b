"""Bring your own model, data and graph: one call from a torch model, arrays or a torch Dataset, a
graph or a mixing matrix, a mechanism and a budget to trained models and their privacy report.

```python
result = dpdl.fit(model, loss, train=(x, y), test=(x_test, y_test),
                  graph=nx.karate_club_graph(), mechanism="decor", eps=10, delta=1e-5,
                  steps=500, lr=0.1, clip=1.0)
result.privacy[0].epsilon, result.final_metrics["test_accuracy"], result.load_into(model)
```

What it does is what `dpdl train` does for a named task (Algorithm 1 of Whisper D-SGD / CorN-DSGD
and of DECOR, [`dpdl.simulation.dsgd`][dpdl.simulation.dsgd]), with the user's parts in place of the
catalogue's: the model becomes a [`TorchModelTask`][dpdl.tasks.torch_model.TorchModelTask] (batch or
per-example gradients, `torch.func.vmap` over agents, or agent by agent on replicas of the model for
convolutions on a CPU), the training examples are split over the graph's agents by a partitioner (a
name of `dpdl.choices.PARTITIONS`, index arrays, or a function), the mixing matrix is the graph's
under a mixing rule or the user's own (validated; its support is the graph), and the mechanism is a
registered name, calibrated to `(eps, delta)` over the run against the threat it is designed for, or
a mechanism the user built, only accounted.

[`design_noise`][dpdl.experiments.fit.design_noise] is the noise alone, calibrated, for a training
loop of the user's own (`examples/calibrate_only.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import numbers
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import torch
from scipy import sparse
from torch import nn

from dpdl.accounting import AgentLevel, Calibration, ExampleLevel, PrivacyReport, account, calibrate
from dpdl.choices import PARTITIONS
from dpdl.errors import ConfigError, DivergenceError
from dpdl.experiments.checkpoints import load_state, save_state
from dpdl.experiments.fit_checks import checked_data, probe, require_graph_object, require_seed
from dpdl.experiments.saved_models import (
    OWN_MODEL,
    ModelsInfo,
    SavedModels,
    load_models,
    require_module,
    save_models,
)
from dpdl.files import claimed_folder, folder_lock, json_safe, require_regular
from dpdl.graphs import build_graph, mixing_matrix
from dpdl.graphs.mixing import validate_mixing_matrix
from dpdl.graphs.topologies import require_connected
from dpdl.jobspec.device import resolve_device
from dpdl.jobspec.engine import DSGDConfig, StepSize
from dpdl.jobspec.job import neighbouring_relation, privacy_reports
from dpdl.jobspec.resources import (
    JobSizes,
    TaskShape,
    estimate,
    graph_size,
    require_design_fits,
    require_fits,
)
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.mechanisms.registry import build_mechanism
from dpdl.scale import SPARSE_MIN_AGENTS
from dpdl.seeding import purpose_rng
from dpdl.settings import DesignOptions, TaskOptions
from dpdl.simulation.dsgd import run_dsgd
from dpdl.simulation.resume import Checkpoints, EngineState
from dpdl.tasks.catalog import partition_labels
from dpdl.tasks.torch_model import Loss, TorchModelTask, require_strategy
from dpdl.threads import compute_threads, require_threads
from dpdl.threats import ThreatModel, threat_by_name

__all__ = ["FitResult", "design_noise", "fit", "graph_and_weights", "split_examples"]

logger = logging.getLogger(__name__)

#: Training or test data: ``(inputs, targets)`` arrays (or tensors) of equal length, or a
#: map-style torch Dataset whose items are ``(input, target)`` pairs.
Data = tuple[Any, Any] | torch.utils.data.Dataset
#: How examples are split over agents: a name of :data:`PARTITIONS`, one index array per agent, or
#: ``function(targets, n_agents, rng) -> index arrays``.
Partition = str | Sequence[np.ndarray] | Callable[[np.ndarray, int, np.random.Generator], Any]
#: A graph: a networkx graph (any node labels), a mixing matrix (dense or scipy.sparse), or a
#: specification of ``dpdl train --graph`` (``"ring"``, ``"facebook"``, ``"edgelist:PATH"``, ...).
GraphLike = nx.Graph | np.ndarray | sparse.spmatrix | str


def split_examples(
    targets: np.ndarray,
    n_agents: int,
    partition: Partition = "iid",
    seed: int = 0,
    alpha: float = 10.0,
    labels_per_agent: int = 1,
) -> list[np.ndarray]:
    """One index array per agent into `targets`' examples: disjoint, none empty, every index in
    range (checked whatever made them). A name draws them from `seed` (`alpha`: Dirichlet
    concentration of `dirichlet` and `quantity-skew`; `labels_per_agent`: classes each agent
    holds under `labels-per-agent`)."""
    rng = purpose_rng(seed, "partition")
    if isinstance(partition, str):
        if partition not in PARTITIONS:
            raise ConfigError(f"unknown partition {partition!r}; known: {', '.join(PARTITIONS)}")
        options = TaskOptions(partition=partition, alpha=alpha, labels_per_agent=labels_per_agent)
        parts = partition_labels(targets, n_agents, options, rng)
    elif callable(partition):
        parts = partition(targets, n_agents, rng)
    else:
        parts = partition
    parts = [np.asarray(part) for part in parts]
    if len(parts) != n_agents:
        raise ConfigError(f"the partition has {len(parts)} parts for {n_agents} agents")
    for agent, part in enumerate(parts):
        if part.ndim != 1 or len(part) == 0 or not np.issubdtype(part.dtype, np.integer):
            raise ConfigError(f"agent {agent}'s part must be a non-empty array of integer indices")
        if part.min() < 0 or part.max() >= len(targets):
            raise ConfigError(f"agent {agent}'s part has indices outside 0..{len(targets) - 1}")
    every = np.concatenate(parts)
    if len(np.unique(every)) != len(every):
        raise ConfigError("the partition's parts overlap: an example belongs to two agents")
    return parts


def graph_and_weights(
    graph: GraphLike,
    mixing: str = "metropolis-hastings",
    seed: int = 0,
    n: int | None = None,
    p: float | None = None,
) -> tuple[nx.Graph, np.ndarray]:
    """The graph over agents `0..n-1` and its mixing matrix.

    A networkx graph is relabelled `0..n-1` in node order and must be connected; its matrix is
    `mixing`'s. A matrix is validated (square, nonnegative, doubly stochastic unless
    row-stochastic on a directed support, and mixing) and its off-diagonal support is the graph. A
    string is a `dpdl train --graph` specification: a synthetic topology takes `n` agents (and
    the edge probability `p` of `er`), drawn from `seed` when random; `n` and `p` beside a graph
    or a matrix, a multigraph and a matrix of complex numbers are refused
    ([`require_graph_object`][dpdl.experiments.fit_checks.require_graph_object])."""
    require_graph_object(graph, n, p)
    if isinstance(graph, str):
        built = build_graph(graph, n, p, seed=seed)
        return built, mixing_matrix(built, mixing)
    if isinstance(graph, nx.Graph):
        relabelled = nx.convert_node_labels_to_integers(graph, ordering="default")
        require_connected(relabelled, "the graph")
        return relabelled, mixing_matrix(relabelled, mixing)
    if sparse.issparse(graph) or isinstance(graph, np.ndarray):
        dense = graph.toarray() if sparse.issparse(graph) else np.asarray(graph, dtype=float)
        symmetric = dense.shape[0] == dense.shape[-1] and np.array_equal(dense > 0, dense.T > 0)
        weights = validate_mixing_matrix(dense, doubly_stochastic=symmetric)
        support = (weights > 0) & ~np.eye(len(weights), dtype=bool)
        built = nx.from_numpy_array(
            support.astype(int), create_using=nx.Graph if symmetric else nx.DiGraph
        )
        require_connected(built, "the graph of the mixing matrix")
        return built, weights
    raise ConfigError(
        f"graph: expected a networkx graph, a mixing matrix or a graph specification, got "
        f"{type(graph).__name__}"
    )


def _graph_size(graph: GraphLike, n: int | None, p: float | None) -> tuple[int, int] | None:
    """`(agents, edges)` of `graph` without building it, where that is known (a networkx
    graph, a matrix, a synthetic topology's name)."""
    if isinstance(graph, str):
        return graph_size(graph, n, p)
    if isinstance(graph, nx.Graph):
        return graph.number_of_nodes(), graph.number_of_edges()
    if sparse.issparse(graph) or isinstance(graph, np.ndarray):
        shape = np.shape(graph)
        count = graph.nnz if sparse.issparse(graph) else np.count_nonzero(graph)
        return (shape[0], int(count) // 2) if len(shape) == 2 else None
    return None


def _threats(threats: Sequence[str | ThreatModel]) -> list[ThreatModel]:
    return [threat_by_name(t) if isinstance(t, str) else t for t in threats]


def _reports(
    mechanism: NoiseMechanism,
    adjacent: AgentLevel | ExampleLevel,
    steps: int,
    delta: float,
    threats: Sequence[str | ThreatModel],
) -> list[PrivacyReport]:
    """The mechanism's own threat, the eavesdropper and one curious agent (as `dpdl train`
    reports), then each of `threats` not among them."""
    reports = privacy_reports(mechanism, adjacent, steps, delta)
    seen = {str(report.threat) for report in reports}
    for threat in _threats(threats):
        if str(threat) not in seen:
            reports.append(account(mechanism, threat, adjacent, steps, delta))
            seen.add(str(threat))
    return reports


def _mechanism(
    mechanism: str | NoiseMechanism,
    graph: nx.Graph,
    weights: np.ndarray,
    adjacent: AgentLevel | ExampleLevel,
    eps: float | None,
    delta: float,
    steps: int,
    calibration: str,
    design: DesignOptions | None,
) -> tuple[NoiseMechanism, Calibration | None]:
    if isinstance(mechanism, NoiseMechanism):
        if mechanism.n != len(weights):
            raise ConfigError(
                f"the mechanism is for {mechanism.n} agents, the graph has {len(weights)}"
            )
        return mechanism, None
    if mechanism == "none":
        return build_mechanism("none", graph, weights, None), None
    if eps is None:
        raise ConfigError(f"mechanism {mechanism!r} needs a budget: give eps (and delta)")
    budget = calibrate(eps, delta, steps, adjacent, calibration)
    return build_mechanism(mechanism, graph, weights, budget, design or DesignOptions()), budget


@dataclass
class FitResult:
    """What [`fit`][dpdl.experiments.fit.fit] returns: every agent's final parameters (`models`,
    `(n, d)`), the metrics recorded along the way (`history`; the last record is
    `final_metrics`), the privacy accounted (`privacy`: the mechanism's own threat first), the
    mechanism and the calibration it was sized by (None for no noise or a mechanism given built),
    and the graph and mixing matrix the agents used."""

    models: np.ndarray
    history: list[dict[str, float]]
    privacy: list[PrivacyReport]
    mechanism: NoiseMechanism
    calibration: Calibration | None
    graph: nx.Graph
    weights: np.ndarray
    task: TorchModelTask = field(repr=False)
    #: The seed the run was drawn from (None: not known).
    seed: int | None = None

    @property
    def final_metrics(self) -> dict[str, float]:
        return self.history[-1]

    @property
    def average_model(self) -> np.ndarray:
        """The agents' parameters averaged, `(d,)`."""
        return self.models.mean(axis=0)

    def load_into(self, model: nn.Module, agent: int | None = None) -> nn.Module:
        """Write agent `agent`'s parameters (default: the average) into `model`, a module of
        the architecture trained; returns it."""
        require_module(model, "model")
        if agent is not None and (
            isinstance(agent, bool)
            or not isinstance(agent, numbers.Integral)
            or not 0 <= agent < len(self.models)
        ):
            raise ConfigError(f"agent: expected one of 0..{len(self.models) - 1}, got {agent!r}")
        flat = self.average_model if agent is None else self.models[agent]
        expected = sum(p.numel() for p in model.parameters())
        if expected != flat.size:
            raise ConfigError(f"the model has {expected} parameters, the result {flat.size}")
        like = next(model.parameters())
        nn.utils.vector_to_parameters(
            torch.as_tensor(flat, dtype=like.dtype, device=like.device), model.parameters()
        )
        return model

    def save(self, folder: Path | str, overwrite: bool = False) -> Path:
        """Write the result into `folder`: every agent's model and their average as state dicts
        of the model's parameter names (safetensors files), the graph and mixing matrix, and a
        manifest with the metrics recorded, the mechanism, the privacy reports and every file's
        SHA-256 ([`dpdl.experiments.saved_models`][dpdl.experiments.saved_models]). Returns
        `folder`; [`FitResult.load`][dpdl.experiments.fit.FitResult.load] reads it back.

        The folder holds one result (`claimed_folder`, its lock held
        while it is written): a folder of another result (other agents, seed, mechanism or model)
        or one that dpdl did not write is refused; `overwrite=True` clears one that dpdl wrote
        first."""
        info = ModelsInfo(
            task={"name": OWN_MODEL, "module": type(self.task.model).__name__},
            seed=self.seed,
            mechanism=self.mechanism.describe(),
            privacy=[report.as_dict() for report in self.privacy],
            history=self.history,
            calibration=None if self.calibration is None else self.calibration.as_dict(),
        )
        layout = self.task.parameter_layout()
        settings = {
            "agents": len(self.models),
            "parameters": layout.dim,
            "seed": self.seed,
            "mechanism": self.mechanism.describe(),
        }
        with claimed_folder(Path(folder), "fit", settings, overwrite, "folder", "overwrite=True"):
            return save_models(folder, self.models, layout, info, self.graph, self.weights)

    @staticmethod
    def load(folder: Path | str) -> SavedModels:
        """The result [`save`][dpdl.experiments.fit.FitResult.save] wrote into `folder`, checked
        ([`load_models`][dpdl.experiments.saved_models.load_models]): its `models`,
        `average_model`, `history`, `final_metrics`, `privacy` (plain data), `graph` and
        `weights`, and `load_into(model, agent=None)` as here. The mechanism and the task are not
        rebuilt: they hold the training data."""
        return load_models(folder)

    def as_dict(self) -> dict[str, Any]:
        """Plain data of the result (for JSON): metrics, privacy and the noise design."""
        return {
            "n": len(self.weights),
            "mechanism": self.mechanism.describe(),
            "trace_WRW": self.mechanism.variance_after_mixing(self.weights),
            "privacy": [report.as_dict() for report in self.privacy],
            "final_metrics": self.final_metrics,
            "history": self.history,
        }


def fit(
    model: nn.Module,
    loss: Loss,
    train: Data,
    test: Data,
    graph: GraphLike,
    *,
    mechanism: str | NoiseMechanism = "ldp",
    eps: float | None = None,
    delta: float = 1e-5,
    steps: int = 1000,
    lr: float = 0.1,
    schedule: str = "constant",
    clip: float = 1.0,
    clip_level: str = "agent",
    batch_size: int = 32,
    partition: Partition = "iid",
    alpha: float = 10.0,
    mixing: str = "metropolis-hastings",
    n: int | None = None,
    p: float | None = None,
    calibration: str = "exact",
    design: DesignOptions | None = None,
    threats: Sequence[str | ThreatModel] = (),
    l2: float = 0.0,
    classification: bool = True,
    eval_every: int | None = None,
    seed: int = 0,
    progress: bool = True,
    device: str | torch.device = "cpu",
    threads: int | None = None,
    strategy: str = "auto",
    callbacks: Sequence[Callable[[int, dict[str, float]], None]] = (),
    checkpoint: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume_from: str | Path | None = None,
) -> FitResult:
    """Train copies of `model` on the agents of `graph` by noisy D-SGD and account the privacy.

    Every argument is checked before anything is built or trained, the model and the loss by one
    probe on two examples ([`dpdl.experiments.fit_checks`][dpdl.experiments.fit_checks]): a bad
    one is a [`DpdlError`][dpdl.errors.DpdlError] naming it.

    `loss(outputs, targets)` gives per-example losses `(B,)`. `train` and `test` are `Data`; the
    training examples are split over the agents by `partition`
    ([`split_examples`][dpdl.experiments.fit.split_examples]), and every agent's model and their
    average model are evaluated on `test` (`test_loss`, `test_accuracy` when `classification`, each
    with its `_average_model`; `consensus_distance`). `graph` is a `GraphLike`
    ([`graph_and_weights`][dpdl.experiments.fit.graph_and_weights]; `n` and `p` for a synthetic
    topology's name).

    `mechanism`: a registered name (`ldp`, `cdp`, `decor`, `whisper`, ... or a plugin's), calibrated
    so that the run is `(eps, delta)`-DP against the threat it is designed for, or `"none"`, or a
    [`NoiseMechanism`][dpdl.mechanisms.base.NoiseMechanism] built by the caller, then only
    accounted. `clip_level` `"agent"` clips each agent's batch gradient at `clip` (agent-level
    privacy, uniform batches); `"example"` clips each example's and samples batches by Poisson
    sampling of expected size `batch_size` (example-level privacy). `threats`: more threat models to
    account against (names of `dpdl.choices.THREAT_REGISTRY`). Metrics are recorded every
    `eval_every` steps (default: 10 records). Deterministic in `seed`; the model's initial
    parameters are its own at the call. `device`: where to train (`cpu`, `cuda`, `cuda:K` or
    `auto`); batches and noise are drawn on the host from the same seeds whatever the device, so the
    numbers agree to rounding. `progress`: a progress bar of the steps where the error stream is a
    terminal (none elsewhere); `False`: none at all. `threads`: the threads torch and BLAS compute
    with during the run (restored after it); None: the cores this process may use that the machine's
    other work leaves idle (`dpdl.threads.default_threads`). `strategy`: how every agent's gradient
    is computed (`dpdl.tasks.torch_model.STRATEGIES`; `auto`: the fastest measured for the model and
    device).

    `callbacks`: functions called with `(step, metrics)` at each evaluation, as the record is made
    (e.g.
    [`dpdl.experiments.tensorboard.TensorBoardLog`][dpdl.experiments.tensorboard.TensorBoardLog]).
    `checkpoint`: a file the run's state is saved to every `checkpoint_every` steps (default: at
    each evaluation) and at the end, atomically
    ([`dpdl.experiments.checkpoints`][dpdl.experiments.checkpoints]). `resume_from`: such a file, of
    a call with the same arguments, model, data and graph, to continue from: the result equals the
    uninterrupted run's bit for bit; a checkpoint of other arguments is refused, naming what
    differs. A resumed run's callbacks see the records made after the checkpoint only.

    A run whose models, gradients, noise or metrics stop being finite (a loss that returns NaN, a
    step size too large) stops with a [`DivergenceError`][dpdl.errors.DivergenceError] naming the
    step, the agent and the likely cause.
    """
    arguments = dict(locals())  # the plain ones name the run in a checkpoint
    require_threads(threads)
    require_strategy(strategy)
    record = _calling(callbacks)
    _require_checkpoints(checkpoint_every, resume_from)
    threats = _threats(threats)  # an unknown name fails here, not after training
    checks = {"seed": seed, "l2": l2, "classification": classification, "progress": progress}
    sets = checked_data(model, train, test, device=device, strategy=strategy, **checks)
    (inputs, targets), (test_inputs, test_targets) = sets["train"], sets["test"]
    dsgd = _engine(steps, StepSize(lr, schedule), clip, clip_level, batch_size, eval_every)
    name = mechanism.name if isinstance(mechanism, NoiseMechanism) else mechanism
    check = partial(_require_fit_fits, _shape(model, inputs, test_inputs), name, dsgd)
    known = _graph_size(graph, n, p)
    if known is not None:
        check(known)
    probe(model, loss, sets, classification=classification, strategy=strategy,
          example_clip=clip if clip_level == "example" else None)  # fmt: skip
    graph_, weights = graph_and_weights(graph, mixing, seed, n, p)
    if known is None:
        check((graph_.number_of_nodes(), graph_.number_of_edges()))
    agents = len(weights)
    parts = split_examples(targets, agents, partition, seed, alpha)
    task = TorchModelTask(
        "custom",
        model,
        loss,
        inputs,
        targets,
        parts,
        test_inputs,
        test_targets,
        l2=l2,
        classification=classification,
        strategy=strategy,
        seed=seed,
    )
    adjacent = neighbouring_relation(clip_level, clip, batch_size, task)
    noise, budget = _mechanism(
        mechanism, graph_, weights, adjacent, eps, delta, steps, calibration, design
    )
    logger.info("fit: %d agents, %s, %d steps", agents, noise.name or "custom noise", steps)
    data = (inputs, targets, test_inputs, test_targets)
    saving = _fit_checkpoints(arguments, name, parts, data, task, dsgd, weights, noise)
    with (
        compute_threads(threads),
        _checkpoint_lock(arguments["checkpoint"]),
        _noting_checkpoint(arguments["checkpoint"]),
    ):
        result = run_dsgd(
            task, weights, noise, dsgd, seed=seed, progress=progress, device=device,
            callback=record, checkpoints=saving,
        )  # fmt: skip
    reports = _accounted(noise, adjacent, steps, delta, threats, budget, calibration, eps)
    return FitResult(
        result.params, result.history, reports, noise, budget, graph_, weights, task, seed
    )


def _shape(model: torch.nn.Module, inputs: torch.Tensor, test_inputs: torch.Tensor) -> TaskShape:
    """What the job estimate needs of a model and its data: parameters, examples, input size."""
    return TaskShape(
        sum(p.numel() for p in model.parameters()),
        "torch",
        len(inputs),
        len(test_inputs),
        int(np.prod(inputs.shape[1:])),
        itemsize=4,
        copies=2,
    )


def _require_fit_fits(
    shape: TaskShape, name: str, dsgd: DSGDConfig, agents: tuple[int, int]
) -> None:
    """Refuse, before any work, a fit on `agents` (agents, edges) that does not fit here."""
    sizes = JobSizes(
        *agents, name, agents[0] < SPARSE_MIN_AGENTS, shape, dsgd.batch_size,
        dsgd.clip_level, dsgd.steps, eval_every=dsgd.eval_every,
    )  # fmt: skip
    require_fits(estimate(sizes), f"fit (n = {agents[0]:,} agents, d = {shape.dim:,})")


def _engine(
    steps: int,
    step_size: StepSize,
    clip: float,
    clip_level: str,
    batch_size: int,
    eval_every: int | None,
) -> DSGDConfig:
    """The engine's settings of a `fit`: Poisson batches at the example level, uniform ones at
    the agent level, and 10 evaluations unless `eval_every` says."""
    return DSGDConfig(
        steps=steps,
        step_size=step_size,
        clip=clip,
        clip_level=clip_level,
        batch_size=batch_size,
        sampling="poisson" if clip_level == "example" else "uniform",
        eval_every=eval_every if eval_every is not None else max(1, steps // 10),
    )


@contextlib.contextmanager
def _noting_checkpoint(checkpoint: str | Path | None) -> Iterator[None]:
    """A [`DivergenceError`][dpdl.errors.DivergenceError] of the run, saying that `checkpoint`
    (where it was saving) holds a state from before the divergence, which resuming would repeat."""
    try:
        yield
    except DivergenceError as error:
        if checkpoint is None or not Path(checkpoint).is_file():
            raise
        raise DivergenceError(
            f"{error} (the checkpoint {checkpoint} holds a state from before step {error.step}: "
            "resuming from it would diverge again)",
            error.step,
            error.agent,
            error.cause,
        ) from None


def _accounted(
    noise: NoiseMechanism,
    adjacent: AgentLevel | ExampleLevel,
    steps: int,
    delta: float,
    threats: Sequence[str | ThreatModel],
    budget: Calibration | None,
    calibration: str,
    eps: float | None,
) -> list[PrivacyReport]:
    """The run's privacy reports (`_reports`), the first (the mechanism's own threat) checked
    never to exceed the target of an exact calibration: an overshoot is a bug, never a result."""
    reports = _reports(noise, adjacent, steps, delta, threats)
    if (
        budget is not None
        and calibration == "exact"
        and eps is not None
        and reports[0].epsilon > eps
    ):
        raise RuntimeError(f"calibration overshoot: {reports[0]} exceeds the target eps={eps}")
    return reports


def _calling(
    callbacks: Sequence[Callable[[int, dict[str, float]], None]],
) -> Callable[[int, dict[str, float]], None]:
    """One callback that calls each of `callbacks` in turn."""
    if callable(callbacks) or not all(callable(c) for c in callbacks):
        raise ConfigError("callbacks: expected a sequence of functions (step, metrics)")
    callbacks = list(callbacks)

    def record(step: int, metrics: dict[str, float]) -> None:
        for callback in callbacks:
            callback(step, metrics)

    return record


def _checkpoint_lock(path: str | Path | None) -> contextlib.AbstractContextManager[None]:
    """Hold the lock of the checkpoint file `path` (none: no lock) while the fit runs: a second
    fit saving into the same file is refused, naming the process that holds it."""
    if path is None:
        return contextlib.nullcontext()
    path = Path(path)
    return folder_lock(path.parent, f"fit saving {path.name}", f".{path.name}.lock")


def _require_checkpoints(every: Any, resume_from: str | Path | None) -> None:
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ConfigError(f"checkpoint_every: expected an integer >= 1, got {every!r}")
    if resume_from is not None:
        require_regular(Path(resume_from), "resume_from: checkpoint")


def _plain(value: Any) -> bool:
    """Whether `value` is plain data that a checkpoint's settings keep as it is."""
    return value is None or isinstance(value, (bool, int, float, str, dict))


def _digest(*arrays: Any) -> str:
    """SHA-256 (hex) of arrays' dtypes, shapes and bytes (a dense copy of a sparse one)."""
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array.toarray() if sparse.issparse(array) else array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes() if array.dtype.kind != "O" else repr(array).encode())
    return digest.hexdigest()


#: Arguments of :func:`fit` that say where and how it runs, not what it computes: a checkpoint
#: does not hold them, and a resumed run may change them.
UNNAMED = ("checkpoint", "checkpoint_every", "resume_from", "progress", "threads", "callbacks")


def _fit_checkpoints(
    arguments: dict[str, Any],
    name: str,
    parts: list[np.ndarray],
    data: tuple[np.ndarray, ...],
    task: TorchModelTask,
    dsgd: DSGDConfig,
    weights: np.ndarray,
    noise: NoiseMechanism,
) -> Checkpoints | None:
    """The engine's checkpoints of a fit of `arguments` (None: it neither saves nor resumes).
    Its run is named by the plain arguments, the mechanism's name, digests of the partition,
    model (architecture and initial parameters) and data (`(inputs, targets, test inputs, test
    targets)`), and, as fingerprint, the digest of the mixing matrix and noise covariance."""
    path, resume_from = arguments["checkpoint"], arguments["resume_from"]
    if path is None and resume_from is None:
        return None
    partition, design = arguments["partition"], arguments["design"]
    settings = {
        **{key: value for key, value in arguments.items() if _plain(value)},
        "mechanism": name,
        "partition": partition if isinstance(partition, str) else _digest(*parts),
        "design": None if design is None else json_safe(asdict(design)),
        "eval_every": dsgd.eval_every,
        "device": resolve_device(arguments["device"]).type,
        "model": f"{arguments['model']!r} {_digest(task.initial_params().cpu().numpy())}",
        "train": _digest(*data[:2]),
        "test": _digest(*data[2:]),
    }
    for key in UNNAMED:
        settings.pop(key, None)
    fingerprint = _digest(weights, noise.covariance())

    def save(state: EngineState) -> None:
        if path is not None:
            save_state(Path(path), state, settings, fingerprint)

    saving = Checkpoints(save, arguments["checkpoint_every"] or dsgd.eval_every)
    if resume_from is not None:
        saving.start, _ = load_state(Path(resume_from), settings, fingerprint)
    return saving


def design_noise(
    graph: GraphLike,
    mechanism: str,
    eps: float,
    delta: float,
    steps: int,
    neighbouring: AgentLevel | ExampleLevel,
    *,
    mixing: str = "metropolis-hastings",
    n: int | None = None,
    p: float | None = None,
    calibration: str = "exact",
    design: DesignOptions | None = None,
    threats: Sequence[str | ThreatModel] = (),
    seed: int = 0,
) -> tuple[NoiseMechanism, np.ndarray, list[PrivacyReport]]:
    """The noise of `mechanism` for `graph`, calibrated so that `steps` D-SGD steps are `(eps,
    delta)`-DP against its threat, for the privacy unit `neighbouring`: one agent's data with each
    agent's gradient clipped ([`AgentLevel`][dpdl.accounting.neighbouring.AgentLevel]), or one
    example with per-example clipping and Poisson sampling
    ([`ExampleLevel`][dpdl.accounting.neighbouring.ExampleLevel]).

    Returns `(mechanism, mixing matrix, privacy reports)`. Draw one step's noise for all agents
    with `mechanism.sample(rng, dim)` (`(n, dim)`, covariance R per coordinate), or agent i's
    own from the seeds it holds with `mechanism.agent_noise`, and add it to each agent's clipped
    gradient: at the example level, the sum of the clipped per-example gradients divided by the
    expected batch size B, whose sensitivity `C / B` the calibration assumes."""
    require_seed(seed)
    threats = _threats(threats)
    what = f"the {mechanism} design"
    known = require_design_fits(mechanism, _graph_size(graph, n, p), what)
    graph_, weights = graph_and_weights(graph, mixing, seed, n, p)
    if not known:
        require_design_fits(mechanism, (graph_.number_of_nodes(), graph_.number_of_edges()), what)
    noise, _ = _mechanism(
        mechanism, graph_, weights, neighbouring, eps, delta, steps, calibration, design
    )
    return noise, weights, _reports(noise, neighbouring, steps, delta, threats)
