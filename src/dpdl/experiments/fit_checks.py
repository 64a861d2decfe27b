"""The checks [`fit`][dpdl.experiments.fit.fit], [`tune`][dpdl.experiments.tune.tune] and
[`diagnose`][dpdl.experiments.tune.diagnose] make of the caller's model, loss, data, graph and
options before anything is built or trained.

Each refusal is one [`DpdlError`][dpdl.errors.DpdlError] that names the argument: `ConfigError`
for the model, the loss and the options, `DataError` for the data, `GraphError` and
`MixingMatrixError` for the graph. What is checked:

- the options: `seed` an integer, `n` and `p` only beside a topology's name that reads them,
  `device` one torch sees, `l2` finite and nonnegative, `classification` a flag;
- the data: numbers (real, finite), targets of a classification integer labels `(B,)`, from 0 to
  the model's outputs, test inputs of the training inputs' shape;
- the model: parameters (float32, every one trainable, on the CPU or on `device`, none on the meta
  device), and no layer the per-example gradients of `torch.func` cannot take
  (`UNSUPPORTED_LAYERS`: a BatchNorm in training mode mixes the examples of a batch);
- one probe on two training examples, the path the run takes (`probe`): the model's forward,
  the loss's shape (one loss per example, `(B,)`), one gradient step's gradients at the run's
  clipping level, and one evaluation. It costs one forward and backward pass of two examples.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import torch
from scipy import sparse
from torch import nn

from dpdl.choices import GRAPH_SOURCES, RANDOM_GRAPHS, REAL_GRAPHS
from dpdl.errors import ConfigError, DataError, GraphError, MixingMatrixError
from dpdl.graphs.readers import graph_file_spec
from dpdl.jobspec.device import resolve_device
from dpdl.tasks.base import Batch
from dpdl.tasks.torch_model import Loss, TorchModelTask

__all__ = [
    "PROBE_EXAMPLES",
    "UNSUPPORTED_LAYERS",
    "checked_data",
    "data_arrays",
    "probe",
    "require_graph_object",
    "require_model",
    "require_options",
    "require_seed",
    "require_targets",
]

#: The training examples the probe runs the model, the loss and the gradients on.
PROBE_EXAMPLES = 2

_BATCH_NORM = (nn.modules.batchnorm._BatchNorm, nn.SyncBatchNorm)
_DROPOUT = (
    nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout,
)  # fmt: skip

#: Layers `fit` refuses, with what to use instead, by kind. A BatchNorm or InstanceNorm that
#: tracks statistics, dropout and RReLU are refused in training mode only (in evaluation mode,
#: `model.eval()`, they act on each example alone, deterministically), and dropout and RReLU
#: only where the gradients may be vmapped (any strategy but `loop`).
UNSUPPORTED_LAYERS: dict[str, str] = {
    "BatchNorm": (
        "normalises each feature over the examples of a batch, so one example's gradient "
        "depends on the others' and cannot be clipped alone; use nn.GroupNorm or nn.LayerNorm "
        "(as Opacus advises), or call model.eval() first to freeze its statistics"
    ),
    "InstanceNorm": (
        "updates its running statistics in place, which the per-example gradients of "
        "torch.func cannot; give it track_running_stats=False or use nn.GroupNorm"
    ),
    "dropout": (
        "draws random numbers in training mode, which the batched gradients of torch.func "
        "(vmap) cannot; give strategy='loop' (agent by agent, drawing from torch's generator), "
        "or call model.eval() first (dropout then off)"
    ),
    "RReLU": (
        "draws random slopes in training mode, which torch.func (vmap) cannot; give "
        "strategy='loop', use nn.LeakyReLU, or call model.eval() first"
    ),
    "recurrent": (
        "has no batching rule in torch.func (vmap), which computes every agent's gradient; "
        "write the recurrence with nn.RNNCell, nn.LSTMCell or nn.GRUCell in a loop"
    ),
}


def checked_data(
    model: Any,
    train: Any,
    test: Any,
    *,
    seed: Any,
    l2: Any,
    classification: Any,
    progress: Any,
    device: Any,
    strategy: str,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """`train` and `test` as `(inputs, targets)` arrays by name, after the checks of `fit`'s
    options (`require_seed`, `require_options`), of its model (`require_model`) and of the
    data (`data_arrays`, `require_targets`): what needs no probe."""
    require_seed(seed)
    require_options(l2, classification, progress)
    require_model(model, device, strategy)
    sets = {"train": data_arrays(train, "train"), "test": data_arrays(test, "test")}
    for what, (_, targets) in sets.items():
        require_targets(targets, what, classification)
    return sets


def require_seed(seed: Any) -> None:
    """Refuse a seed that is not an integer >= 0 (a float, a bool, a string)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"seed: expected an integer >= 0, got {seed!r}")


def require_options(l2: Any, classification: Any, progress: Any) -> None:
    """Refuse `l2` that is not a finite number >= 0, and flags that are not True or False."""
    if isinstance(l2, bool) or not isinstance(l2, numbers.Real) or not np.isfinite(l2) or l2 < 0:
        raise ConfigError(f"l2: expected a finite number >= 0, got {l2!r}")
    for name, value in (("classification", classification), ("progress", progress)):
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: expected True or False, got {value!r}")


def require_graph_object(graph: Any, n: Any, p: Any) -> None:
    """Refuse what a graph object would silently drop: `n` or `p` beside a networkx graph or a
    matrix (they size a topology given by name), a multigraph (its repeated edges would count
    once in the mixing matrix, or twice, by rule), and a matrix that is not real numbers."""
    if isinstance(graph, str):
        _require_sized_by_name(graph, n, p)
        return
    for name, value in (("n", n), ("p", p)):
        if value is not None:
            raise ConfigError(
                f"{name}: applies to a topology given by name (graph='er', 'ring', ...); the "
                f"graph given is a {type(graph).__name__} of its own size: drop {name}={value!r}"
            )
    if isinstance(graph, nx.MultiGraph):  # MultiDiGraph too
        raise GraphError(
            f"graph: a {type(graph).__name__} is not supported: its parallel edges have no "
            "meaning in a mixing matrix; pass nx.Graph(graph) (one edge per pair) or your own "
            "mixing matrix weighting the edges"
        )
    if sparse.issparse(graph) or isinstance(graph, np.ndarray):
        kind = graph.dtype.kind
        if kind not in "biuf":
            what = "complex" if kind == "c" else f"of dtype {graph.dtype}"
            raise MixingMatrixError(
                f"graph: the mixing matrix is {what}; a mixing matrix holds real weights "
                "(nonnegative, rows summing to 1)"
            )


def _require_sized_by_name(graph: str, n: Any, p: Any) -> None:
    """Refuse `n` or `p` beside a topology's name that does not read them: a real graph or a
    graph file has its own size, and only the random built-in graphs take `p` (a plugin's
    source reads what it reads)."""
    target = GRAPH_SOURCES.entry(graph).target if graph in GRAPH_SOURCES else None
    if target is not None and not isinstance(target, str):  # imported once used: its path
        target = f"{getattr(target, '__module__', '')}:{getattr(target, '__qualname__', '')}"
    module = target.partition(":")[0] if target is not None else ""
    patterns = [name.partition("<")[0] for name in REAL_GRAPHS if "<" in name]
    own_size = (
        target == "dpdl.graphs.sources:real"
        or graph_file_spec(graph) is not None
        or (target is None and any(graph.startswith(prefix) for prefix in patterns))
    )  # an unknown name is left to build_graph, whose error lists the known ones
    if own_size and n is not None:
        raise ConfigError(
            f"n: graph {graph!r} (a real graph or a graph file) has its own size: drop n={n!r}"
        )
    builtin = own_size or module == "dpdl.graphs.sources"
    if builtin and graph not in RANDOM_GRAPHS and p is not None:
        raise ConfigError(
            f"p: the edge probability applies to {', '.join(RANDOM_GRAPHS)}, not to graph "
            f"{graph!r}: drop p={p!r}"
        )


def data_arrays(data: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """`(inputs, targets)` of `data` as numpy arrays of equal, non-zero length: real numbers
    (bool or numeric, not complex), the inputs finite, the targets finite where floats."""
    if isinstance(data, (tuple, list)):
        if len(data) != 2:
            raise ConfigError(f"{what}: expected (inputs, targets), got a sequence of {len(data)}")
        inputs, targets = (
            _array(part, f"{what} {name}") for part, name in zip(data, _PARTS, strict=True)
        )
    elif isinstance(data, torch.utils.data.Dataset) and hasattr(data, "__len__"):
        items = [data[i] for i in range(len(data))]
        pairs = all(isinstance(item, (tuple, list)) and len(item) == 2 for item in items)
        if not items or not pairs:
            raise ConfigError(f"{what}: a Dataset must hold (input, target) pairs")
        inputs = _stacked([x for x, _ in items], f"{what} inputs")
        targets = _stacked([y for _, y in items], f"{what} targets")
    else:
        raise ConfigError(
            f"{what}: expected (inputs, targets) arrays or a map-style torch Dataset, got "
            f"{type(data).__name__}"
        )
    if inputs.ndim == 0 or targets.ndim == 0:
        raise DataError(f"{what}: inputs and targets need one row per example, got a scalar")
    if len(inputs) == 0 or len(inputs) != len(targets):
        raise ConfigError(
            f"{what}: {len(inputs)} inputs and {len(targets)} targets; need as many, at least one"
        )
    if not np.isfinite(inputs).all():
        raise ConfigError(f"{what}: the inputs hold NaN or infinite values")
    if not np.isfinite(targets).all():
        raise DataError(f"{what}: the targets hold NaN or infinite values")
    return inputs, targets


_PARTS = ("inputs", "targets")


def _array(part: Any, what: str) -> np.ndarray:
    """`part` (a tensor on any device, an array or nested lists) as a numpy array of reals."""
    try:
        if isinstance(part, torch.Tensor):
            if part.is_meta:
                raise DataError(f"{what}: a tensor on the meta device holds no data")
            array = part.detach().cpu().numpy()
        else:
            array = np.asarray(part)
    except (TypeError, ValueError, RuntimeError) as error:
        if isinstance(error, DataError):
            raise
        raise DataError(f"{what}: not an array of numbers ({error})") from None
    if array.dtype.kind not in "biuf":
        kind = "complex numbers" if array.dtype.kind == "c" else f"dtype {array.dtype}"
        raise DataError(f"{what}: expected real numbers, got {kind}")
    return array


def _stacked(items: list[Any], what: str) -> np.ndarray:
    arrays = [_array(item, what) for item in items]
    if len({a.shape for a in arrays}) > 1:
        raise DataError(f"{what}: the Dataset's items differ in shape ({arrays[0].shape}, ...)")
    return np.stack(arrays)


def require_targets(targets: np.ndarray, what: str, classification: bool) -> None:
    """A classification's targets are integer labels `(B,)` from 0 (their upper bound, the model's
    outputs, is the probe's)."""
    if not classification:
        return
    if targets.ndim != 1:
        raise DataError(
            f"{what}: classification needs one integer label per example (B,), got targets of "
            f"shape {targets.shape} (one-hot rows? give their argmax; or classification=False)"
        )
    if targets.dtype.kind not in "iu":
        raise DataError(
            f"{what}: classification needs integer labels 0..C-1, got targets of dtype "
            f"{targets.dtype} (cast them with .astype(int), or give classification=False)"
        )
    if targets.min() < 0:
        raise DataError(f"{what}: labels must be 0..C-1, got {targets.min()}")


def require_model(model: Any, device: Any, strategy: str = "auto") -> torch.device:
    """Refuse a model `fit` cannot train as asked: no parameters, a frozen one, one not float32,
    on the meta device, on several devices or on a device other than `device` (where the run
    would not go), or a layer of `UNSUPPORTED_LAYERS` (under the gradient `strategy`). Returns
    the device resolved."""
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model: expected a torch nn.Module, got {type(model).__name__}")
    target = resolve_device(device)
    named = list(model.named_parameters())
    if not named:
        raise ConfigError(
            f"model: a {type(model).__name__} without parameters has nothing to train"
        )
    frozen = [name for name, p in named if not p.requires_grad]
    if frozen:
        raise ConfigError(
            f"model: parameters {', '.join(frozen[:5])} have requires_grad=False; fit trains, "
            "clips and noises every parameter and would not keep them frozen: set "
            "requires_grad=True, or apply the frozen layers to the data first (features) and "
            "fit the trainable part on them"
        )
    dtypes = sorted({str(p.dtype) for _, p in named} - {"torch.float32"})
    if dtypes:
        raise ConfigError(
            f"model: parameters of dtype {', '.join(dtypes)}; fit computes the model in float32 "
            "(the noise and mixing in float64): call model.float()"
        )
    tensors = [p for _, p in named] + list(model.buffers())
    devices = sorted({str(t.device) for t in tensors})
    if "meta" in devices:
        raise ConfigError(
            "model: has tensors on the meta device (no values): materialise it with "
            "model.to_empty(device='cpu') and initialise it, or build it on the CPU"
        )
    if len(devices) > 1:
        raise ConfigError(f"model: its tensors lie on several devices ({', '.join(devices)})")
    placed = torch.device(devices[0])
    if placed.type != "cpu" and _normal(placed) != _normal(target):
        raise ConfigError(
            f"model: its parameters are on {placed} but device={device!r} trains on {target}: "
            f"pass device='{placed}' to train there, or move the model to the CPU"
        )
    _require_layers(model, strategy)
    return target


def _normal(device: torch.device) -> torch.device:
    """`cuda` and `cuda:0` alike (the current GPU's index)."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _require_layers(model: nn.Module, strategy: str) -> None:
    for name, module in model.named_modules():
        kind = _unsupported(module)
        if kind in ("dropout", "RReLU") and strategy == "loop":
            continue
        if kind is not None:
            where = f"layer {name!r}" if name else "the model"
            raise ConfigError(
                f"model: {where} ({type(module).__name__}) {UNSUPPORTED_LAYERS[kind]}"
            )


def _unsupported(module: nn.Module) -> str | None:
    """The key of `UNSUPPORTED_LAYERS` that refuses `module`, or None."""
    if isinstance(module, nn.RNNBase):
        return "recurrent"
    if not module.training:
        return None
    if isinstance(module, _BATCH_NORM):
        return "BatchNorm"
    if isinstance(module, nn.modules.instancenorm._InstanceNorm):
        return "InstanceNorm" if module.track_running_stats else None
    if isinstance(module, _DROPOUT) and module.p > 0:
        return "dropout"
    return "RReLU" if isinstance(module, nn.RReLU) else None


def probe(
    model: nn.Module,
    loss: Loss,
    data: dict[str, tuple[np.ndarray, np.ndarray]],
    *,
    classification: bool,
    example_clip: float | None,
    strategy: str,
) -> None:
    """Run `model` and `loss` once on `PROBE_EXAMPLES` examples of `data["train"]`, on the path
    the run takes (a [`TorchModelTask`][dpdl.tasks.torch_model.TorchModelTask] of those examples,
    on the model's device): the outputs (`(B, C)`, C >= 2, for a classification, and every label
    of `data` below C), the loss (`(B,)`, finite), one step's gradients (per example when
    `example_clip`) and one evaluation. `data`'s other sets (`test`, `validation`) must have the
    training inputs' shape. A failure is a `ConfigError` naming `model` or `loss` with torch's
    own message, or a `DataError` naming the data set."""
    if not callable(loss):
        raise ConfigError(f"loss: expected a function (outputs, targets) -> (B,), got {loss!r}")
    inputs, targets = data["train"]
    for what, (other, _) in data.items():
        if other.shape[1:] != inputs.shape[1:]:
            raise DataError(
                f"{what}: inputs of shape {other.shape[1:]} per example, the training inputs' "
                f"{inputs.shape[1:]}"
            )
    rows = np.arange(min(PROBE_EXAMPLES, len(inputs)))
    x, y = inputs[rows], targets[rows]
    task = _attempt(
        lambda: TorchModelTask(
            "probe", model, loss, x, y, [np.arange(len(rows))], x, y,
            classification=classification, strategy=strategy,
        ),
        "model", "its training data",
    )  # fmt: skip
    task.to(next(model.parameters()).device)
    flat = task.initial_params()[None]
    described = f"{len(rows)} training inputs (float32, shape {tuple(task.inputs.shape)})"
    with torch.no_grad():
        outputs = _attempt(lambda: task.outputs(flat[0].float(), task.inputs), "model", described)
        _require_outputs(outputs, len(rows), classification, data)
        losses = _attempt(lambda: loss(outputs, task.targets), "loss", "the model's outputs")
    _require_losses(losses, len(rows))
    batch = Batch(np.arange(len(rows))[None], np.full((1, len(rows)), 1 / len(rows)))
    batch = batch.to(task.device)
    what = "per-example gradients" if example_clip is not None else "gradients"
    gradient = _attempt(
        lambda: task.gradients(flat, batch, example_clip), "model", f"{what} of {described}"
    )
    if not torch.isfinite(gradient).all():
        raise ConfigError(f"loss: its {what} on {described} are not finite")
    _attempt(lambda: task.evaluate(flat), "model", f"an evaluation on {described}")


def _attempt(call: Callable[[], Any], name: str, what: str) -> Any:
    """`call()`, its failure (the user's code raising) a `ConfigError` naming `name`."""
    try:
        return call()
    except Exception as error:  # the caller's model or loss: any exception is theirs
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ConfigError(f"{name}: fails on {what}: {type(error).__name__}: {message}") from error


def _require_outputs(
    outputs: Any, rows: int, classification: bool, data: dict[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    if not isinstance(outputs, torch.Tensor) or outputs.ndim == 0 or len(outputs) != rows:
        shape = tuple(outputs.shape) if isinstance(outputs, torch.Tensor) else type(outputs)
        raise ConfigError(f"model: expected outputs with one row per example, got {shape}")
    if not classification:
        return
    if outputs.ndim != 2 or outputs.shape[1] < 2:
        raise ConfigError(
            f"model: classification scores the argmax of the outputs, one per class (B, C), "
            f"C >= 2; got outputs of shape {tuple(outputs.shape)} (a single logit? give "
            "classification=False, or one output per class)"
        )
    classes = outputs.shape[1]
    for what, (_, labels) in data.items():
        if labels.max() >= classes:
            raise DataError(
                f"{what}: label {labels.max()} is out of range for the model's {classes} "
                f"outputs (labels 0..{classes - 1})"
            )


def _require_losses(losses: Any, rows: int) -> None:
    if not isinstance(losses, torch.Tensor):
        raise ConfigError(f"loss: expected a tensor of per-example losses, got {type(losses)}")
    if tuple(losses.shape) != (rows,):
        raise ConfigError(
            f"loss: expected one loss per example, shape ({rows},) on {rows} examples, got "
            f"{tuple(losses.shape)}; reduce nothing (e.g. F.cross_entropy(outputs, targets, "
            "reduction='none')): dpdl weighs and clips the examples itself"
        )
    if not losses.is_floating_point():
        raise ConfigError(f"loss: expected floating-point losses, got {losses.dtype}")
    if not torch.isfinite(losses).all():
        raise ConfigError(f"loss: not finite on the first {rows} training examples: {losses}")
