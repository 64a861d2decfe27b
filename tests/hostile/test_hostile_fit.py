"""Hostile calls of ``dpdl.fit``, ``dpdl.tune``, ``dpdl.diagnose`` and ``dpdl.design_noise`` with
the caller's own model, loss, data and graph (issue 49, item 5): each must raise a
:class:`~dpdl.errors.DpdlError` subclass naming the argument before any training, where it raised
a raw torch or numpy error mid-run or was silently accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import pytest
import torch
from scipy import sparse
from torch import nn
from torch.nn import functional as F

import dpdl
import dpdl.experiments.fit as fit_module
from dpdl.accounting import AgentLevel
from dpdl.errors import ConfigError, DataError, DpdlError, GraphError, MixingMatrixError
from dpdl.graphs import mixing_matrix

pytestmark = pytest.mark.hostile

RING = nx.cycle_graph(4)
W = mixing_matrix(RING, "metropolis-hastings")
X = np.random.default_rng(0).standard_normal((40, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64)
NAN = float("nan")


def _loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(outputs, targets, reduction="none")


def _mse(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return (outputs[:, 0] - targets) ** 2


OPTIONS: dict[str, Any] = {
    "mechanism": "ldp", "eps": 5.0, "steps": 3, "clip": 0.1, "batch_size": 4, "progress": False,
}  # fmt: skip


def _fit(**changes: Any) -> Any:
    """``dpdl.fit`` of a tiny model on 4 agents with ``changes`` to its arguments."""
    kwargs: dict[str, Any] = {
        "model": nn.Linear(3, 2), "loss": _loss, "train": (X, Y), "test": (X, Y), "graph": RING,
        **OPTIONS,
    }  # fmt: skip
    kwargs.update(changes)
    return dpdl.fit(**kwargs)


def _regression(**changes: Any) -> Any:
    targets = X[:, 1].astype(np.float64)
    kwargs = {"model": nn.Linear(3, 1), "loss": _mse, "train": (X, targets)}
    kwargs |= {"test": (X, targets), "classification": False}
    return _fit(**{**kwargs, **changes})


def _tune(**changes: Any) -> Any:
    kwargs: dict[str, Any] = {
        "model": nn.Linear(3, 2), "loss": _loss, "train": (X, Y), "graph": RING,
        "test": (X, Y), "lr": [0.1, 0.2], **OPTIONS,
    }  # fmt: skip
    kwargs.update(changes)
    return dpdl.tune(**kwargs)


def _diagnose(**changes: Any) -> Any:
    kwargs: dict[str, Any] = {
        "model": nn.Linear(3, 2), "loss": _loss, "train": (X, Y), "test": (X, Y), "graph": RING,
        **OPTIONS,
    }  # fmt: skip
    kwargs.update(changes)
    return dpdl.diagnose(**kwargs)


def _design(**changes: Any) -> Any:
    kwargs: dict[str, Any] = {
        "graph": RING, "mechanism": "ldp", "eps": 5.0, "delta": 1e-5, "steps": 10,
        "neighbouring": AgentLevel(0.1),
    }  # fmt: skip
    kwargs.update(changes)
    return dpdl.design_noise(**kwargs)


def _mlp(*middle: nn.Module, width: int = 4) -> nn.Module:
    """Linear(3, width), the layers `middle`, Linear(width, 2)."""
    return nn.Sequential(nn.Linear(3, width), *middle, nn.Linear(width, 2))


class _Recurrent(nn.Module):
    def __init__(self, kind: type[nn.RNNBase]) -> None:
        super().__init__()
        self.cell = kind(3, 4, batch_first=True)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.cell(x[:, None, :])
        return self.head(outputs[:, -1])


class _Conv(nn.Module):
    """A convolution on the inputs as a 1 x 3 signal, then ``norm``."""

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 2)
        self.norm = norm
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.conv(x[:, None, :])).flatten(1))


class _Tuple(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(x), x


class _Raises(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise KeyError("no such feature 'age'")


def _frozen(*names: str) -> nn.Module:
    model = _mlp(nn.ReLU())
    for name, parameter in model.named_parameters():
        if name in names or not names:
            parameter.requires_grad_(False)
    return model


class _Items(torch.utils.data.Dataset):
    """A map-style Dataset of the given (input, target) items."""

    def __init__(self, items: list[tuple[Any, Any]]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        return self.items[i]


def _multi(kind: type[nx.MultiGraph]) -> nx.MultiGraph:
    graph = kind(RING)
    graph.add_edge(0, 1)
    return graph


def _complex_w() -> np.ndarray:
    weights = W.astype(complex)
    weights[0, 1] += 0.1j
    return weights


def _with(targets: np.ndarray, index: int, value: Any) -> np.ndarray:
    targets = targets.copy()
    targets[index] = value
    return targets


def _load_into(model: Any = None, agent: Any = None) -> Any:
    """`FitResult.load_into` of a result of 4 agents of `nn.Linear(3, 2)` (8 parameters)."""
    result = dpdl.FitResult(np.zeros((4, 8)), [{}], [], None, None, RING, W, None)
    return result.load_into(nn.Linear(3, 2) if model is None else model, agent)


def _raising_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    raise ValueError("weights of the classes not set")


# name -> (call, the DpdlError subclass expected, a word the message must contain)
CASES: dict[str, tuple[Callable[[], Any], type[DpdlError], str]] = {
    # labels
    "labels-out-of-range": (lambda: _fit(train=(X, Y + 5)), DataError, "train"),
    "labels-one-beyond-the-outputs": (lambda: _fit(train=(X, _with(Y, 7, 2))), DataError, "train"),
    "labels-huge": (lambda: _fit(train=(X, _with(Y, 3, 10**12))), DataError, "train"),
    "labels-negative": (lambda: _fit(train=(X, Y - 1)), DataError, "train"),
    "labels-float": (lambda: _fit(train=(X, Y + 0.5)), DataError, "train"),
    "labels-float-whole": (lambda: _fit(train=(X, Y.astype(float))), DataError, "train"),
    "labels-float-tensor": (lambda: _fit(train=(X, torch.tensor(Y).float())), DataError, "train"),
    "labels-bool": (lambda: _fit(train=(X, Y.astype(bool))), DataError, "train"),
    "labels-one-hot": (lambda: _fit(train=(X, np.eye(2)[Y].astype(int))), DataError, "train"),
    "labels-strings": (lambda: _fit(train=(X, np.where(Y > 0, "a", "b"))), DataError, "train"),
    "labels-complex": (lambda: _fit(train=(X, Y + 0j)), DataError, "train"),
    "labels-nan": (lambda: _fit(train=(X, np.where(Y > 0, NAN, 0.0))), DataError, "train"),
    "test-labels-out-of-range": (lambda: _fit(test=(X, Y + 2)), DataError, "test"),
    "test-labels-negative": (lambda: _fit(test=(X, -Y)), DataError, "test"),
    "test-labels-float": (lambda: _fit(test=(X, Y * 1.0)), DataError, "test"),
    "labels-three-classes-two-outputs": (
        lambda: _fit(train=(X, np.arange(40) % 3)),
        DataError,
        "train",
    ),
    # inputs and targets
    "inputs-too-narrow-for-the-model": (lambda: _fit(model=nn.Linear(5, 2)), ConfigError, "model"),
    "inputs-too-wide-for-the-model": (
        lambda: _fit(train=(np.hstack([X, X]), Y), test=(np.hstack([X, X]), Y)),
        ConfigError,
        "model",
    ),
    "test-inputs-narrower-than-train": (lambda: _fit(test=(X[:, :2], Y)), DataError, "test"),
    "test-inputs-of-another-rank": (lambda: _fit(test=(X[:, :, None], Y)), DataError, "test"),
    "inputs-infinite": (lambda: _fit(train=(_with(X, 0, np.inf), Y)), ConfigError, "train"),
    "inputs-complex": (lambda: _fit(train=(X + 1j, Y)), DataError, "train"),
    "inputs-strings": (lambda: _fit(train=(X.astype(str), Y)), DataError, "train"),
    "inputs-objects": (
        lambda: _fit(train=(np.array([{"x": 1}] * 40, dtype=object), Y)),
        DataError,
        "train",
    ),
    "inputs-ragged-lists": (
        lambda: _fit(train=([[1.0, 2.0, 3.0], [1.0]] * 20, Y)),
        DataError,
        "train",
    ),
    "inputs-scalar": (lambda: _fit(train=(np.float32(1.0), 1)), DataError, "train"),
    "inputs-meta-tensor": (
        lambda: _fit(train=(torch.empty(40, 3, device="meta"), Y)),
        DataError,
        "train",
    ),
    "dataset-items-of-two-shapes": (
        lambda: _fit(train=_Items([(X[0], 0), (X[1, :2], 1)] * 20)),
        DataError,
        "train",
    ),
    "dataset-string-targets": (
        lambda: _fit(train=_Items([(X[i], "yes") for i in range(40)])),
        DataError,
        "train",
    ),
    "regression-targets-nan": (
        lambda: _regression(train=(X, _with(X[:, 1], 4, NAN))),
        DataError,
        "train",
    ),
    "regression-targets-infinite": (
        lambda: _regression(train=(X, _with(X[:, 1], 4, -np.inf))),
        DataError,
        "train",
    ),
    "regression-test-targets-nan": (
        lambda: _regression(test=(X, _with(X[:, 1], 0, NAN))),
        DataError,
        "test",
    ),
    # the loss
    "loss-reduced-to-its-mean": (
        lambda: _fit(loss=lambda o, t: F.cross_entropy(o, t)),
        ConfigError,
        "loss",
    ),
    "loss-reduced-to-its-sum": (
        lambda: _fit(loss=lambda o, t: F.cross_entropy(o, t, reduction="sum")),
        ConfigError,
        "loss",
    ),
    "loss-of-shape-b-by-1": (
        lambda: _fit(loss=lambda o, t: _loss(o, t)[:, None]),
        ConfigError,
        "loss",
    ),
    "loss-per-output": (lambda: _fit(loss=lambda o, t: -F.log_softmax(o, 1)), ConfigError, "loss"),
    "loss-returns-numpy": (lambda: _fit(loss=lambda o, t: np.zeros(len(t))), ConfigError, "loss"),
    "loss-returns-a-float": (lambda: _fit(loss=lambda o, t: 0.5), ConfigError, "loss"),
    "loss-returns-integers": (
        lambda: _fit(loss=lambda o, t: (o.argmax(1) != t).long()),
        ConfigError,
        "loss",
    ),
    "loss-returns-nan": (lambda: _fit(loss=lambda o, t: o[:, 0] * NAN), ConfigError, "loss"),
    "loss-a-name": (lambda: _fit(loss="cross_entropy"), ConfigError, "loss"),
    "loss-a-module-class": (lambda: _fit(loss=None), ConfigError, "loss"),
    "loss-raises": (lambda: _fit(loss=_raising_loss), ConfigError, "loss"),
    "loss-of-one-argument": (lambda: _fit(loss=lambda o: o.sum(1)), ConfigError, "loss"),
    # layers that mix examples or that torch.func cannot take
    "model-batchnorm": (lambda: _fit(model=_mlp(nn.BatchNorm1d(4))), ConfigError, "GroupNorm"),
    "model-batchnorm-example-level": (
        lambda: _fit(model=_mlp(nn.BatchNorm1d(4)), clip_level="example"),
        ConfigError,
        "BatchNorm",
    ),
    "model-batchnorm-without-running-stats": (
        lambda: _fit(model=_mlp(nn.BatchNorm1d(4, track_running_stats=False))),
        ConfigError,
        "model",
    ),
    "model-batchnorm2d-in-a-convolution": (
        lambda: _fit(model=_Conv(nn.BatchNorm1d(2))),
        ConfigError,
        "model",
    ),
    "model-sync-batchnorm": (lambda: _fit(model=_mlp(nn.SyncBatchNorm(4))), ConfigError, "model"),
    "model-instancenorm-with-running-stats": (
        lambda: _fit(model=_Conv(nn.InstanceNorm1d(2, track_running_stats=True))),
        ConfigError,
        "track_running_stats",
    ),
    "model-dropout": (lambda: _fit(model=_mlp(nn.Dropout(0.5))), ConfigError, "model"),
    "model-dropout-example-level": (
        lambda: _fit(model=_mlp(nn.Dropout(0.1)), clip_level="example", strategy="vmap"),
        ConfigError,
        "Dropout",
    ),
    "model-alpha-dropout": (lambda: _fit(model=_mlp(nn.AlphaDropout(0.2))), ConfigError, "model"),
    "model-rrelu": (lambda: _fit(model=_mlp(nn.RReLU())), ConfigError, "RReLU"),
    "model-lstm": (lambda: _fit(model=_Recurrent(nn.LSTM)), ConfigError, "LSTMCell"),
    "model-gru": (lambda: _fit(model=_Recurrent(nn.GRU)), ConfigError, "model"),
    "model-rnn-example-level": (
        lambda: _fit(model=_Recurrent(nn.RNN), clip_level="example"),
        ConfigError,
        "model",
    ),
    # the model's parameters, dtype and device
    "model-without-parameters": (lambda: _fit(model=nn.Identity()), ConfigError, "model"),
    "model-of-activations-only": (
        lambda: _fit(model=nn.Sequential(nn.ReLU(), nn.Softmax(1))),
        ConfigError,
        "model",
    ),
    "model-a-class-not-an-instance": (lambda: _fit(model=nn.Linear), ConfigError, "model"),
    "model-all-frozen": (lambda: _fit(model=_frozen()), ConfigError, "requires_grad"),
    "model-bias-frozen": (lambda: _fit(model=_frozen("2.bias")), ConfigError, "2.bias"),
    "model-on-meta": (lambda: _fit(model=nn.Linear(3, 2, device="meta")), ConfigError, "meta"),
    "model-float64": (lambda: _fit(model=nn.Linear(3, 2).double()), ConfigError, "float64"),
    "model-float16": (lambda: _fit(model=nn.Linear(3, 2).half()), ConfigError, "model"),
    "model-bfloat16": (lambda: _fit(model=nn.Linear(3, 2).bfloat16()), ConfigError, "model"),
    "model-one-output-classified": (
        lambda: _fit(
            model=nn.Linear(3, 1),
            loss=lambda o, t: F.binary_cross_entropy_with_logits(
                o[:, 0], t.float(), reduction="none"
            ),
        ),
        ConfigError,
        "model",
    ),
    "model-outputs-of-rank-3": (
        lambda: _fit(model=nn.Sequential(nn.Linear(3, 2), nn.Unflatten(1, (2, 1)))),
        ConfigError,
        "model",
    ),
    "model-returns-a-tuple": (lambda: _fit(model=_Tuple()), ConfigError, "model"),
    "model-raises": (lambda: _fit(model=_Raises()), ConfigError, "model"),
    "model-embedding-of-float-inputs": (
        lambda: _fit(model=nn.Sequential(nn.Embedding(10, 2), nn.Flatten(), nn.Linear(6, 2))),
        ConfigError,
        "model",
    ),
    # options without effect, and bad ones
    "seed-fraction": (lambda: _fit(seed=1.5), ConfigError, "seed"),
    "seed-negative": (lambda: _fit(seed=-1), ConfigError, "seed"),
    "seed-string": (lambda: _fit(seed="7"), ConfigError, "seed"),
    "seed-bool": (lambda: _fit(seed=True), ConfigError, "seed"),
    "seed-numpy-float": (lambda: _fit(seed=np.float64(3.0)), ConfigError, "seed"),
    "n-beside-a-networkx-graph": (lambda: _fit(n=10), ConfigError, "n"),
    "p-beside-a-networkx-graph": (lambda: _fit(p=0.5), ConfigError, "p"),
    "n-beside-a-mixing-matrix": (lambda: _fit(graph=W, n=4), ConfigError, "n"),
    "n-beside-a-real-graph": (lambda: _fit(graph="florentine", n=4), ConfigError, "n="),
    "p-beside-a-ring": (lambda: _fit(graph="ring", n=4, p=0.5), ConfigError, "p="),
    "p-beside-a-real-graph": (lambda: _fit(graph="karate", p=0.1), ConfigError, "p="),
    "n-beside-a-graph-file": (lambda: _fit(graph="edgelist:graph.txt", n=4), ConfigError, "n="),
    "multigraph": (lambda: _fit(graph=_multi(nx.MultiGraph)), GraphError, "graph"),
    "multidigraph": (lambda: _fit(graph=_multi(nx.MultiDiGraph)), GraphError, "MultiDiGraph"),
    "mixing-matrix-complex": (lambda: _fit(graph=_complex_w()), MixingMatrixError, "graph"),
    "mixing-matrix-complex-sparse": (
        lambda: _fit(graph=sparse.csr_matrix(_complex_w())),
        MixingMatrixError,
        "complex",
    ),
    "mixing-matrix-of-strings": (lambda: _fit(graph=W.astype(str)), MixingMatrixError, "graph"),
    "l2-negative": (lambda: _fit(l2=-0.1), ConfigError, "l2"),
    "l2-nan": (lambda: _fit(l2=NAN), ConfigError, "l2"),
    "classification-a-string": (lambda: _fit(classification="yes"), ConfigError, "classification"),
    "progress-a-number": (lambda: _fit(progress=2), ConfigError, "progress"),
    "device-unknown": (lambda: _fit(device="tpu"), ConfigError, "device"),
    "device-meta": (lambda: _fit(device="meta"), ConfigError, "device"),
    "device-gpu-index-absent": (lambda: _fit(device="cuda:97"), ConfigError, "device"),
    # dpdl.design_noise
    "design-noise-seed-fraction": (lambda: _design(seed=0.5), ConfigError, "seed"),
    "design-noise-n-beside-a-graph": (lambda: _design(n=8), ConfigError, "n"),
    "design-noise-p-beside-a-star": (lambda: _design(graph="star", n=5, p=0.2), ConfigError, "p="),
    "design-noise-multigraph": (lambda: _design(graph=_multi(nx.MultiGraph)), GraphError, "graph"),
    "design-noise-complex-matrix": (
        lambda: _design(graph=_complex_w()),
        MixingMatrixError,
        "graph",
    ),
    # dpdl.tune: refused before the first search run
    "tune-loss-reduced": (
        lambda: _tune(loss=lambda o, t: F.cross_entropy(o, t)),
        ConfigError,
        "loss",
    ),
    "tune-batchnorm": (lambda: _tune(model=_mlp(nn.BatchNorm1d(4))), ConfigError, "model"),
    "tune-labels-out-of-range": (lambda: _tune(train=(X, Y + 3)), DataError, "train"),
    "tune-validation-too-narrow": (
        lambda: _tune(validation=(X[:10, :2], Y[:10])),
        DataError,
        "validation",
    ),
    "tune-validation-labels-float": (
        lambda: _tune(validation=(X, Y * 1.0)),
        DataError,
        "validation",
    ),
    "tune-n-beside-a-graph": (lambda: _tune(n=6), ConfigError, "n"),
    "tune-frozen-parameters": (lambda: _tune(model=_frozen("0.weight")), ConfigError, "model"),
    "tune-model-float64": (lambda: _tune(model=nn.Linear(3, 2).double()), ConfigError, "model"),
    # dpdl.diagnose
    "diagnose-loss-reduced": (
        lambda: _diagnose(loss=lambda o, t: F.cross_entropy(o, t)),
        ConfigError,
        "loss",
    ),
    "diagnose-batchnorm": (lambda: _diagnose(model=_mlp(nn.BatchNorm1d(4))), ConfigError, "model"),
    "diagnose-seed-fraction": (lambda: _diagnose(seed=2.5), ConfigError, "seed"),
    "diagnose-labels-float": (lambda: _diagnose(train=(X, Y + 0.5)), DataError, "train"),
    "diagnose-multigraph": (lambda: _diagnose(graph=_multi(nx.MultiGraph)), GraphError, "graph"),
    # FitResult.load_into
    "load-into-a-class": (lambda: _load_into(nn.Linear), ConfigError, "model"),
    "load-into-a-state-dict": (
        lambda: _load_into(nn.Linear(3, 2).state_dict()),
        ConfigError,
        "model",
    ),
    "load-into-a-meta-model": (
        lambda: _load_into(nn.Linear(3, 2, device="meta")),
        ConfigError,
        "meta",
    ),
    "load-into-agent-beyond": (lambda: _load_into(agent=4), ConfigError, "agent"),
    "load-into-agent-negative": (lambda: _load_into(agent=-1), ConfigError, "agent"),
    "load-into-agent-float": (lambda: _load_into(agent=1.0), ConfigError, "agent"),
    # dpdl.load_models
    "load-models-of-none": (lambda: dpdl.load_models(None), ConfigError, "folder"),
    "load-models-of-a-result": (lambda: dpdl.load_models({"models": []}), ConfigError, "folder"),
}


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the run's task or starting the engine fails the test: every case must be refused
    before."""

    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the job was built or training started before the refusal")

    monkeypatch.setattr(fit_module, "TorchModelTask", started)
    monkeypatch.setattr(fit_module, "run_dsgd", started)


@pytest.mark.parametrize("name", CASES)
def test_a_bad_call_is_refused_before_training(name: str, no_training: None) -> None:
    call, expected, keyword = CASES[name]
    with pytest.raises(DpdlError) as caught:
        call()
    assert isinstance(caught.value, expected), f"{type(caught.value).__name__}: {caught.value}"
    assert keyword.lower() in str(caught.value).lower(), str(caught.value)
