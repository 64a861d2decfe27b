"""Models that load back: every agent's final model and the agents' average model, saved as state
dicts in safetensors files with a JSON manifest, and read back checked.

A folder of saved models (written by `dpdl train --save-models`, one per seed, and by
[`FitResult.save`][dpdl.experiments.fit.FitResult.save]) holds

- `average.safetensors`: the agents' average model, the mean of their parameters (the model whose
  metrics a run reports as `*_average_model`);
- `agent-<i>.safetensors`: agent `i`'s model, for `i = 0 .. n-1`;
- `mixing.safetensors` (saved by `FitResult.save`): the graph's edges (`edges`, `(m, 2)`) and the
  mixing matrix's nonzero entries (`weights_rows`, `weights_columns`, `weights_values`);
- `manifest.json`: the format and its version, the dpdl version, the task (a catalogue name and its
  options, or `"own model"`), the parameters (names, shapes, dtypes; whether they are a torch
  module's state dict or the vector of a task without one, and the shape of one input), the number
  of agents, the seed, the mechanism and the privacy reports, the metrics recorded, and every file
  with its SHA-256.

Each model file is a state dict: parameter names mapped to tensors (`"0.weight"`, `"0.bias"`, ...),
in float64 as the engine holds them; `safetensors.torch.load_file` reads one alone, and reading
one executes no code. A task without a torch module (logistic regression, the quadratics) saves its
vector under the names it defines
([`Task.parameter_layout`][dpdl.tasks.base.Task.parameter_layout]). The manifest is written last,
atomically: a folder whose manifest is missing, is not JSON, or lists a file whose bytes do not
have its checksum is refused by
[`load_models`][dpdl.experiments.saved_models.load_models] with a
[`FileFormatError`][dpdl.errors.FileFormatError] naming the file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from scipy import sparse
from torch import nn

from dpdl import __version__
from dpdl.choices import TASKS
from dpdl.errors import ConfigError, FileFormatError
from dpdl.files import atomic_write, json_safe, parse_json, read_regular, require_folder
from dpdl.graphs.mixing import Weights, as_format
from dpdl.tasks.layout import ParameterLayout

if TYPE_CHECKING:
    from dpdl.experiments.train import TrainResult

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "OWN_MODEL",
    "ModelsInfo",
    "SavedModels",
    "load_models",
    "require_module",
    "save_models",
    "save_training_models",
]

logger = logging.getLogger(__name__)

#: The manifest's name for this layout and its version; a change of layout bumps the version.
FORMAT, FORMAT_VERSION = "dpdl-models", 1
#: The manifest's file name in a folder of saved models.
MANIFEST = "manifest.json"
#: The task name of models trained from the user's own module ([`fit`][dpdl.experiments.fit.fit]).
OWN_MODEL = "own model"
#: The dtype the models are saved in: the engine's (every agent's parameters are float64).
DTYPE = "float64"


@dataclass(frozen=True)
class ModelsInfo:
    """What a manifest says of where the models come from.

    `task`: `{"name": NAME, "catalogue": bool, "options": {...}}` for a task of `dpdl train`
    (`catalogue`: a built-in task, whose network
    [`SavedModels.module`][dpdl.experiments.saved_models.SavedModels.module] builds without
    data), or `{"name": "own model", "module": CLASS}`; `mechanism`: its
    description; `privacy`: the privacy reports as plain data (the mechanism's own threat first);
    `history`: the metrics recorded along the run; `calibration`: what the noise was sized by, if
    anything."""

    task: dict[str, Any]
    seed: int | None
    mechanism: dict[str, Any]
    privacy: list[dict[str, Any]]
    history: list[dict[str, float]]
    calibration: dict[str, Any] | None = None


def save_models(
    folder: Path | str,
    models: np.ndarray,
    layout: ParameterLayout,
    info: ModelsInfo,
    graph: nx.Graph | None = None,
    weights: Weights | None = None,
) -> Path:
    """Write every agent's model (the rows of `models`, `(n, d)`), their average and the manifest
    into `folder` (created; files of an earlier save there are replaced), and the graph and mixing
    matrix where given. Returns `folder`."""
    folder = Path(folder)
    require_folder(folder, "the models' folder")
    params = torch.as_tensor(np.asarray(models, dtype=np.float64))
    if params.ndim != 2 or params.shape[0] == 0 or params.shape[1] != layout.dim:
        raise ConfigError(
            f"models: expected (agents, {layout.dim}) parameters, got {tuple(params.shape)}"
        )
    folder.mkdir(parents=True, exist_ok=True)
    # the mean as the engine takes it (torch, float64), so the average model is the one it scored
    files: dict[str, Any] = {"average": _write(folder, "average", layout.unflatten(params.mean(0)))}
    files["agents"] = [
        _write(folder, f"agent-{agent}", layout.unflatten(row)) for agent, row in enumerate(params)
    ]
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dpdl_version": __version__,
        "task": info.task,
        "parameters": layout.as_dict(DTYPE),
        "agents": len(params),
        "seed": info.seed,
        "mechanism": info.mechanism,
        "calibration": info.calibration,
        "privacy": info.privacy,
        "history": info.history,
    }
    if weights is not None:
        if graph is None:
            raise ConfigError("the mixing matrix is saved with its graph: give both")
        files["mixing"] = _write(folder, "mixing", _mixing_tensors(graph, weights))
        manifest["graph"] = {
            "nodes": weights.shape[0],
            "directed": graph.is_directed(),
            "sparse": sparse.issparse(weights),
        }
    manifest["files"] = files
    text = json.dumps(json_safe(manifest), indent=2) + "\n"
    atomic_write(folder / MANIFEST, text.encode())
    logger.info("saved %d agents' models and their average to %s", len(params), folder)
    return folder


def _write(folder: Path, stem: str, tensors: dict[str, torch.Tensor]) -> dict[str, str]:
    """`folder/<stem>.safetensors` and its manifest entry (its name and SHA-256). Written plainly:
    the manifest, written last, vouches for it by its checksum."""
    data = save_tensors({name: t.contiguous() for name, t in tensors.items()}, {"format": "pt"})
    path = folder / f"{stem}.safetensors"
    path.write_bytes(data)
    return {"path": path.name, "sha256": hashlib.sha256(data).hexdigest()}


def _mixing_tensors(graph: nx.Graph, weights: Weights) -> dict[str, torch.Tensor]:
    entries = sparse.coo_array(weights)
    edges = np.array(list(graph.edges()), dtype=np.int64).reshape(-1, 2)
    return {
        "edges": torch.from_numpy(edges),
        "weights_rows": torch.from_numpy(entries.row.astype(np.int64)),
        "weights_columns": torch.from_numpy(entries.col.astype(np.int64)),
        "weights_values": torch.from_numpy(entries.data.astype(np.float64)),
    }


def save_training_models(result: TrainResult, folder: Path) -> list[Path]:
    """`dpdl train --save-models`: every seed's models in `folder/models/seed<s>/`
    ([`save_models`][dpdl.experiments.saved_models.save_models]). Returns the folders."""
    config = result.config
    if result.layout is None:
        raise ConfigError("the training result does not say its parameters' names and shapes")
    task = {
        "name": config.task,
        "catalogue": config.task in TASKS,
        "options": asdict(config.task_options),
    }
    calibration = None if result.calibration is None else result.calibration.as_dict()
    return [
        save_models(
            folder / "models" / f"seed{run.seed}",
            run.models,
            result.layout,
            ModelsInfo(
                task,
                run.seed,
                run.mechanism,
                [report.as_dict() for report in run.privacy],
                run.history,
                calibration,
            ),
        )
        for run in result.runs
    ]


@dataclass(frozen=True, repr=False)
class SavedModels:
    """A folder of saved models, read and checked by
    [`load_models`][dpdl.experiments.saved_models.load_models]: the `manifest` (plain data), the
    parameters' `layout`, every agent's state dict
    ([`agent`][dpdl.experiments.saved_models.SavedModels.agent]) and the average's
    ([`average`][dpdl.experiments.saved_models.SavedModels.average]), and the graph and mixing
    matrix where they were saved (else None)."""

    folder: Path
    manifest: dict[str, Any]
    layout: ParameterLayout
    #: Every agent's state dict as read (``agent(i)`` gives a copy).
    agents: tuple[dict[str, torch.Tensor], ...]
    average_state: dict[str, torch.Tensor]
    graph: nx.Graph | None = None
    weights: Weights | None = None

    def __repr__(self) -> str:
        return (
            f"SavedModels({str(self.folder)!r}, task={self.task!r}, agents={self.n_agents}, "
            f"seed={self.seed!r})"
        )

    @property
    def n_agents(self) -> int:
        return len(self.agents)

    @property
    def task(self) -> str:
        """The task's name: a task of `dpdl train`, or `"own model"`."""
        return str(self.manifest["task"]["name"])

    @property
    def seed(self) -> int | None:
        return self.manifest["seed"]

    @property
    def history(self) -> list[dict[str, float]]:
        """The metrics recorded along the run (the last record is the final one)."""
        return _floats(self.manifest["history"])

    @property
    def final_metrics(self) -> dict[str, float]:
        return self.history[-1]

    @property
    def privacy(self) -> list[dict[str, Any]]:
        """The privacy reports as plain data (`PrivacyReport.as_dict`), the mechanism's own threat
        first."""
        return _floats(self.manifest["privacy"])

    def agent(self, agent: int) -> dict[str, torch.Tensor]:
        """Agent `agent`'s state dict (a copy)."""
        if not isinstance(agent, int) or not 0 <= agent < self.n_agents:
            raise ConfigError(f"agent {agent!r}: the saved agents are 0..{self.n_agents - 1}")
        return {name: tensor.clone() for name, tensor in self.agents[agent].items()}

    def average(self) -> dict[str, torch.Tensor]:
        """The average model's state dict (a copy)."""
        return {name: tensor.clone() for name, tensor in self.average_state.items()}

    @property
    def models(self) -> np.ndarray:
        """Every agent's flat parameters, `(n, d)`, as the engine held them."""
        return np.stack([self.layout.flatten(state).numpy() for state in self.agents])

    @property
    def average_model(self) -> np.ndarray:
        """The average model's flat parameters, `(d,)`."""
        return self.layout.flatten(self.average_state).numpy()

    def load_into(self, module: nn.Module, agent: int | None = None) -> nn.Module:
        """Write agent `agent`'s parameters (default: the average model's) into `module`, whose
        parameters must have the saved names and shapes (they are cast to its dtype and device);
        its buffers are left as they are. Returns `module`."""
        require_module(module, "module")
        state = self.average_state if agent is None else self.agent(agent)
        parameters = dict(module.named_parameters())
        self.layout.require_matches(
            {name: tuple(p.shape) for name, p in parameters.items()},
            f"the module ({type(module).__name__})",
        )
        with torch.no_grad():
            for name, parameter in parameters.items():
                parameter.copy_(state[name])
        return module

    def module(self, agent: int | None = None) -> nn.Module:
        """The task's torch module with agent `agent`'s parameters (default: the average model's),
        for models of a task of `dpdl train` with a torch model: a built-in task's network is built
        without its data ([`task_network`][dpdl.tasks.catalog.task_network]); a plugin's task is
        built, data included, to take its network. Refused for a task without a torch module and
        for models of your own module (build it and call
        [`load_into`][dpdl.experiments.saved_models.SavedModels.load_into])."""
        from dpdl.settings import TaskOptions
        from dpdl.tasks.catalog import TASK_NETWORKS, build_task, task_network
        from dpdl.tasks.torch_model import TorchModelTask

        if self.task == OWN_MODEL:
            raise ConfigError(
                f"{self.folder} holds models of your own module: build it and call load_into(it)"
            )
        if not self.layout.module:
            raise ConfigError(
                f"task {self.task!r} has no torch module: its parameters are the tensors "
                f"{', '.join(self.layout.names)} of agent(i) and average()"
            )
        try:
            options = TaskOptions(**self.manifest["task"]["options"])
        except (KeyError, TypeError) as error:
            raise FileFormatError(
                f"{self.folder / MANIFEST}: the task's options are not this dpdl's ({error})"
            ) from None
        with torch.random.fork_rng(devices=[]):  # the initial weights are overwritten
            if self.task in TASK_NETWORKS:
                network = task_network(self.task, options, self.layout.input_shape or ())
            else:
                logger.info("building task %s (with its data) to take its network", self.task)
                built = build_task(self.task, self.n_agents, self.seed or 0, options)
                if not isinstance(built, TorchModelTask):
                    raise ConfigError(f"task {self.task!r} has no torch module")
                network = built.model
        return self.load_into(network, agent)


def require_module(module: Any, what: str) -> None:
    """Refuse `module` that cannot take saved parameters: not an `nn.Module` (a class, a
    function, a state dict), or one with tensors on the meta device (no storage to write)."""
    if not isinstance(module, nn.Module):
        raise ConfigError(f"{what}: expected a torch nn.Module, got {type(module).__name__}")
    if any(t.is_meta for t in (*module.parameters(), *module.buffers())):
        raise ConfigError(
            f"{what}: has tensors on the meta device (no storage to load into): "
            "materialise it first with .to_empty(device='cpu')"
        )


def load_models(folder: Path | str) -> SavedModels:
    """The models saved in `folder` (by `dpdl train --save-models`: `RESULTS/models/seed<s>`, or by
    [`FitResult.save`][dpdl.experiments.fit.FitResult.save]), every file checked against the
    manifest's SHA-256, names, shapes and dtypes before it is parsed into tensors.

    A folder that is not one of saved models, a manifest that is not JSON or not of this format, a
    missing, altered or truncated file: one [`FileFormatError`][dpdl.errors.FileFormatError]
    naming the file and what is wrong."""
    if not isinstance(folder, (str, os.PathLike)):
        raise ConfigError(f"folder: expected a path of saved models, got {type(folder).__name__}")
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder of saved models")
    manifest = _read_manifest(folder)
    where = folder / MANIFEST
    try:
        layout = ParameterLayout.from_dict(manifest["parameters"])
        dtypes = {t["name"]: t["dtype"] for t in manifest["parameters"]["tensors"]}
    except (ConfigError, KeyError, TypeError) as error:
        raise FileFormatError(f"{where}: {error}") from None
    files, agents = manifest["files"], manifest["agents"]
    if not isinstance(files, dict) or not isinstance(files.get("agents"), list):
        raise FileFormatError(f"{where}: 'files' must list the average's and the agents' files")
    if not isinstance(agents, int) or agents < 1 or len(files["agents"]) != agents:
        raise FileFormatError(
            f"{where}: {agents!r} agents, but {len(files['agents'])} agents' files listed"
        )
    read = [_read_state(folder, entry, layout, dtypes) for entry in files["agents"]]
    average = _read_state(folder, files.get("average"), layout, dtypes)
    graph, weights = None, None
    if "mixing" in files:
        graph, weights = _read_mixing(folder, files["mixing"], manifest.get("graph"))
    return SavedModels(folder, manifest, layout, tuple(read), average, graph, weights)


#: The manifest's fields that every reader relies on.
_REQUIRED = ("task", "parameters", "agents", "seed", "mechanism", "privacy", "history", "files")


def _read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    if not path.exists():
        raise FileFormatError(
            f"{folder} holds no {MANIFEST}: not a folder of saved models (dpdl train "
            "--save-models writes RESULTS/models/seed<s>/, FitResult.save a folder of its own)"
        )
    manifest = parse_json(
        read_regular(path, "manifest", FileFormatError), path, "manifest", FileFormatError
    )
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise FileFormatError(f"{path} is not a manifest of saved models (format {FORMAT!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise FileFormatError(
            f"{path}: format version {manifest.get('format_version')!r}; this dpdl "
            f"({__version__}) reads version {FORMAT_VERSION}"
        )
    missing = [key for key in _REQUIRED if key not in manifest]
    if missing or not isinstance(manifest["task"], dict) or "name" not in manifest["task"]:
        raise FileFormatError(f"{path}: missing fields {', '.join(missing) or 'task.name'}")
    history, privacy = manifest["history"], manifest["privacy"]
    records = isinstance(history, list) and history and all(isinstance(r, dict) for r in history)
    if not records or not isinstance(privacy, list):
        raise FileFormatError(
            f"{path}: history must be a non-empty list of records, privacy a list of reports"
        )
    return manifest


def _verified_bytes(folder: Path, entry: Any) -> tuple[Path, bytes]:
    """The bytes of the file a manifest entry (`{"path", "sha256"}`) names, checked against its
    checksum. The path must be a file name in `folder`, nothing above or beside it."""
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("path"), str)
        and isinstance(entry.get("sha256"), str)
    ):
        raise FileFormatError(f"{folder / MANIFEST}: a file entry is not {{path, sha256}}: {entry}")
    name = entry["path"]
    if Path(name).name != name or name in ("", ".", ".."):
        raise FileFormatError(f"{folder / MANIFEST}: {name!r} is not a file name in the folder")
    path = folder / name
    data = read_regular(path, "file listed in the manifest", FileFormatError)
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise FileFormatError(
            f"{path}: its SHA-256 is {digest}, the manifest's {entry['sha256']}: the file was "
            "altered, truncated or replaced since it was saved"
        )
    return path, data


def _parse(path: Path, data: bytes) -> dict[str, torch.Tensor]:
    try:
        return load_tensors(data)
    except (SafetensorError, ValueError, RuntimeError) as error:
        raise FileFormatError(f"{path} is not a safetensors file ({error})") from None


def _read_state(
    folder: Path, entry: Any, layout: ParameterLayout, dtypes: Mapping[str, str]
) -> dict[str, torch.Tensor]:
    path, data = _verified_bytes(folder, entry)
    state = _parse(path, data)
    try:
        layout.require_matches({name: tuple(t.shape) for name, t in state.items()}, str(path))
    except ConfigError as error:
        raise FileFormatError(str(error)) from None
    for name, tensor in state.items():
        if str(tensor.dtype).removeprefix("torch.") != dtypes[name]:
            raise FileFormatError(
                f"{path}: {name} is {tensor.dtype}, the manifest says {dtypes[name]}"
            )
    return state


def _read_mixing(folder: Path, entry: Any, graph: Any) -> tuple[nx.Graph, np.ndarray]:
    path, data = _verified_bytes(folder, entry)
    tensors = {name: t.numpy() for name, t in _parse(path, data).items()}
    try:
        nodes, directed = int(graph["nodes"]), bool(graph["directed"])
        entries = (tensors["weights_values"], (tensors["weights_rows"], tensors["weights_columns"]))
        weights = as_format(sparse.coo_array(entries, shape=(nodes, nodes)), bool(graph["sparse"]))
        built = nx.DiGraph() if directed else nx.Graph()
        built.add_nodes_from(range(nodes))
        built.add_edges_from(map(tuple, tensors["edges"].tolist()))
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise FileFormatError(
            f"{path}: not a graph and mixing matrix of saved models ({error})"
        ) from None
    if built.number_of_nodes() != nodes:
        raise FileFormatError(f"{path}: edges name agents outside 0..{nodes - 1}")
    return built, weights


def _floats(value: Any) -> Any:
    """`value` with the strings [`json_safe`][dpdl.files.json_safe] wrote for non-finite numbers
    turned back into floats."""
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, dict):
        return {key: _floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_floats(item) for item in value]
    return value
