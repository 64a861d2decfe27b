"""Models that load back (:mod:`dpdl.experiments.saved_models`): `FitResult.save` writes every
agent's model and their average as safetensors state dicts with a manifest; `FitResult.load` and
`dpdl.load_models` give them back checked, into the user's module, with the run's metrics, privacy,
graph and mixing matrix; altered or foreign files are refused. (`dpdl train --save-models`:
tests/cli/test_train_models.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import safetensors.torch
import torch
from torch import nn
from torch.nn import functional

import dpdl
from dpdl.errors import ConfigError, FileFormatError
from dpdl.experiments.saved_models import MANIFEST, load_models


def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


def model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(8, 5), nn.Tanh(), nn.Linear(5, 3))


@pytest.fixture(scope="module")
def fitted() -> dpdl.FitResult:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8)) * 2
    labels = rng.integers(0, 3, 200)
    inputs = (centres[labels] + rng.normal(size=(200, 8))).astype(np.float32)
    return dpdl.fit(
        model(), loss, (inputs[:150], labels[:150]), (inputs[150:], labels[150:]),
        nx.karate_club_graph(), mechanism="decor", eps=5.0, steps=8, lr=0.2, batch_size=8,
        seed=4, progress=False,
    )  # fmt: skip


@pytest.fixture
def saved(fitted: dpdl.FitResult, tmp_path: Path) -> Path:
    return fitted.save(tmp_path / "fit")


def test_a_fit_result_round_trips(fitted: dpdl.FitResult, saved: Path) -> None:
    loaded = dpdl.FitResult.load(saved)
    assert isinstance(loaded, dpdl.SavedModels) and loaded.seed == 4 and loaded.n_agents == 34
    assert np.array_equal(loaded.models, fitted.models)
    np.testing.assert_allclose(loaded.average_model, fitted.average_model, rtol=1e-14)
    assert loaded.history == fitted.history and loaded.final_metrics == fitted.final_metrics
    assert loaded.privacy == [report.as_dict() for report in fitted.privacy]
    assert loaded.manifest["mechanism"] == fitted.mechanism.describe()
    assert loaded.manifest["task"] == {"name": "own model", "module": "Sequential"}
    assert np.array_equal(loaded.weights, fitted.weights)
    assert list(loaded.graph) == list(fitted.graph) and not loaded.graph.is_directed()
    edges = sorted(
        map(sorted, fitted.graph.edges())
    )  # its nodes' and edges' attributes are not saved
    assert sorted(map(sorted, loaded.graph.edges())) == edges
    for agent in (None, 0, 33):
        mine, theirs = loaded.load_into(model(), agent), fitted.load_into(model(), agent)
        for (name, p), (_, q) in zip(
            mine.named_parameters(), theirs.named_parameters(), strict=True
        ):
            assert torch.equal(p, q), name
    # each file is a plain state dict, readable without dpdl
    state = safetensors.torch.load_file(saved / "agent-5.safetensors")
    assert list(state) == ["0.bias", "0.weight", "2.bias", "2.weight"]  # safetensors sorts them
    assert torch.equal(state["2.bias"], torch.as_tensor(fitted.models[5, -3:]))
    assert torch.equal(loaded.agent(5)["0.weight"], state["0.weight"])
    manifest = json.loads((saved / MANIFEST).read_text())
    entry = manifest["files"]["agents"][5]
    assert entry["sha256"] == hashlib.sha256((saved / entry["path"]).read_bytes()).hexdigest()
    assert manifest["parameters"]["tensors"][0] == {
        "name": "0.weight", "shape": [5, 8], "dtype": "float64"
    }  # fmt: skip
    with pytest.raises(ConfigError, match="your own module"):
        loaded.module()


def test_a_module_of_other_shapes_or_names_is_refused(saved: Path) -> None:
    loaded = load_models(saved)
    with pytest.raises(ConfigError, match=r"0.weight has shape \(5, 9\), the saved one \(5, 8\)"):
        loaded.load_into(nn.Sequential(nn.Linear(9, 5), nn.Tanh(), nn.Linear(5, 3)))
    with pytest.raises(ConfigError, match=r"no parameter 2\.weight"):
        loaded.load_into(nn.Sequential(nn.Linear(8, 5)))
    with pytest.raises(ConfigError, match=r"the saved agents are 0..33"):
        loaded.agent(34)


def _rewrite(folder: Path, change) -> None:
    manifest = json.loads((folder / MANIFEST).read_text())
    change(manifest)
    (folder / MANIFEST).write_text(json.dumps(manifest))


def test_a_missing_or_foreign_manifest_is_refused(saved: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such folder"):
        load_models(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileFormatError, match=r"holds no manifest\.json"):
        load_models(tmp_path / "empty")
    (saved / MANIFEST).write_bytes(b"\x80\x04\x95 a pickle")
    with pytest.raises(FileFormatError, match="is not JSON"):
        load_models(saved)
    (saved / MANIFEST).write_text('{"format": "something-else"}')
    with pytest.raises(FileFormatError, match="not a manifest of saved models"):
        load_models(saved)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(format_version=2), "format version 2; this dpdl"),
        (lambda m: m.pop("files"), "missing fields files"),
        (lambda m: m.update(history=[]), "history must be a non-empty list of records"),
        (lambda m: m["files"]["agents"].pop(), "34 agents, but 33 agents' files listed"),
        (lambda m: m["files"]["average"].update(path="../fit/x"), "not a file name in the folder"),
        (
            lambda m: m["files"]["average"].update(path="gone.safetensors"),
            "file listed in the manifest not found",
        ),
        (lambda m: m["parameters"].update(kind="pickle"), "malformed"),
        (lambda m: m["parameters"]["tensors"][0].update(shape=[8, 5]), r"\(5, 8\), the saved"),
        (lambda m: m["parameters"]["tensors"][1].update(dtype="float32"), "the manifest says"),
    ],
)
def test_a_manifest_that_does_not_describe_its_files_is_refused(saved: Path, change, message):
    _rewrite(saved, change)
    with pytest.raises(FileFormatError, match=message):
        load_models(saved)


def test_an_altered_or_foreign_file_is_refused(saved: Path) -> None:
    path = saved / "agent-7.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(FileFormatError, match=r"agent-7\.safetensors: its SHA-256 is .* altered"):
        load_models(saved)
    path.write_bytes(b"not tensors")  # and its checksum written to match: parsed, refused
    _rewrite(
        saved,
        lambda m: m["files"]["agents"][7].update(sha256=hashlib.sha256(b"not tensors").hexdigest()),
    )
    with pytest.raises(FileFormatError, match=r"agent-7\.safetensors is not a safetensors file"):
        load_models(saved)


def test_models_of_the_wrong_size_are_not_saved(fitted: dpdl.FitResult, tmp_path: Path) -> None:
    from dpdl.experiments.saved_models import ModelsInfo, save_models

    info = ModelsInfo({"name": "own model"}, 0, {}, [], [{"step": 0.0}])
    layout = fitted.task.parameter_layout()
    with pytest.raises(ConfigError, match=r"expected \(agents, 63\) parameters, got \(2, 62\)"):
        save_models(tmp_path / "bad", np.zeros((2, 62)), layout, info)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        save_models(tmp_path / "file", np.zeros((2, 63)), layout, info)


def test_a_sparse_mixing_matrix_comes_back_sparse(fitted: dpdl.FitResult, tmp_path: Path) -> None:
    """Many agents' mixing matrix is a CSR array (`dpdl.graphs.mixing.as_format`): saved as its
    nonzero entries, it loads back as one, the same entries; a directed graph stays directed."""
    from dpdl.experiments.saved_models import ModelsInfo, save_models
    from dpdl.graphs.mixing import as_format

    graph = nx.DiGraph(nx.cycle_graph(4))
    weights = as_format(np.full((4, 4), 0.25), sparse=True)
    info = ModelsInfo({"name": "own model"}, None, {}, [], [{"step": 0.0}])
    models = np.random.default_rng(1).standard_normal((4, fitted.models.shape[1]))
    folder = save_models(
        tmp_path / "s", models, fitted.task.parameter_layout(), info, graph, weights
    )
    loaded = load_models(folder)
    assert isinstance(loaded.weights, type(weights)) and loaded.graph.is_directed()
    assert (loaded.weights != weights).nnz == 0 and loaded.seed is None
    assert sorted(loaded.graph.edges()) == sorted(graph.edges())
    assert np.array_equal(loaded.models, models)


def test_a_save_into_another_results_folder_is_refused_and_overwrite_clears_it(
    fitted: dpdl.FitResult, tmp_path: Path
) -> None:
    folder = tmp_path / "fit"
    fitted.save(folder)
    fitted.save(folder)  # the same result again: the same files
    (folder / "agent-99.safetensors").write_bytes(b"left by an earlier result of 100 agents")
    marker = json.loads((folder / ".dpdl-run").read_text())
    marker["settings"]["agents"] = 100
    (folder / ".dpdl-run").write_text(json.dumps(marker))
    with pytest.raises(ConfigError, match=r"another run's results .*agents was 100 and is 34"):
        fitted.save(folder)
    assert fitted.save(folder, overwrite=True) == folder
    assert not (folder / "agent-99.safetensors").exists()
    assert load_models(folder).models.shape[0] == 34
    foreign = tmp_path / "thesis"
    foreign.mkdir()
    (foreign / "chapter1.tex").write_text("\\chapter{}")
    with pytest.raises(ConfigError, match="clears only a folder that dpdl wrote"):
        fitted.save(foreign, overwrite=True)
    assert sorted(p.name for p in foreign.iterdir()) == ["chapter1.tex"]


def test_a_fit_saving_into_a_checkpoint_another_fit_holds_is_refused(tmp_path: Path) -> None:
    import fcntl
    import os

    checkpoint = tmp_path / "state.npz"
    handle = os.open(tmp_path / ".state.npz.lock", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(handle, b"31337\n")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as another fit holds it
    rng = np.random.default_rng(0)
    inputs, labels = rng.normal(size=(40, 8)).astype(np.float32), rng.integers(0, 3, 40)
    try:
        with pytest.raises(ConfigError, match=r"fit saving state.npz \(process 31337\)"):
            dpdl.fit(
                model(), loss, (inputs, labels), (inputs, labels), nx.cycle_graph(4),
                mechanism="ldp", eps=5.0, steps=2, lr=0.1, batch_size=4, progress=False,
                checkpoint=checkpoint,
            )  # fmt: skip
    finally:
        os.close(handle)
    assert not checkpoint.exists()
