"""A simulated run's checkpoint files: what is saved reads back equal, float for float, and
anything else is refused with one error naming the file: a pickle (without running it), a torn or
altered file, another format, another engine version, another run's settings."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from dpdl.archives import write_archive
from dpdl.errors import FileFormatError
from dpdl.experiments import checkpoints
from dpdl.experiments.checkpoints import load_state, save_state
from dpdl.simulation.resume import EngineState

SETTINGS = {"steps": 20, "lr": 0.1, "mechanism": "decor", "seeds": [0, 1]}


def _state() -> EngineState:
    rng = np.random.default_rng(0)
    history = [
        {"step": 0.0, "test_loss": 0.1 + 0.2, "consensus_distance": float("nan")},
        {"step": 5.0, "test_loss": 1 / 3, "consensus_distance": 1e-300},
    ]
    return EngineState(
        step=7,
        params=rng.standard_normal((4, 3)),
        history=history,
        tail=[{"step": 7.0, "test_loss": float("inf")}],
        variables={"tracking": rng.standard_normal((4, 3))},
        torch_rng=rng.integers(0, 256, 50).astype(np.uint8),
    )


def test_a_state_reads_back_equal_float_for_float(tmp_path) -> None:
    state = _state()
    save_state(tmp_path / "c.npz", state, SETTINGS, "run", {"agent_metrics": {"a": [0.5]}})
    back, extra = load_state(tmp_path / "c.npz", dict(SETTINGS, seeds=(0, 1)), "run")
    assert back.step == 7 and extra == {"agent_metrics": {"a": [0.5]}}
    np.testing.assert_array_equal(back.params, state.params)
    np.testing.assert_array_equal(back.variables["tracking"], state.variables["tracking"])
    np.testing.assert_array_equal(back.torch_rng, state.torch_rng)
    assert back.history[0]["test_loss"] == 0.1 + 0.2 and back.history[1]["test_loss"] == 1 / 3
    assert np.isnan(back.history[0]["consensus_distance"]) and back.tail[0]["test_loss"] == np.inf
    assert list(back.history[0]) == list(state.history[0])  # the columns keep their order


def test_a_pickle_is_refused_without_running_it(tmp_path) -> None:
    marker = tmp_path / "code-ran"

    class Payload:
        def __reduce__(self) -> tuple:
            return (open, (str(marker), "w"))

    path = tmp_path / "c.npz"
    path.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(FileFormatError, match="not a readable checkpoint"):
        load_state(path, SETTINGS)
    assert not marker.exists()
    buffer = io.BytesIO()
    np.save(buffer, np.array([Payload()], dtype=object), allow_pickle=True)
    path.write_bytes(buffer.getvalue())
    with pytest.raises(FileFormatError, match="not a readable checkpoint"):
        load_state(path, SETTINGS)
    assert not marker.exists()


def test_torn_altered_and_foreign_files_are_refused(tmp_path) -> None:
    path = tmp_path / "c.npz"
    save_state(path, _state(), SETTINGS, "run")
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(FileFormatError, match=str(path)):
        load_state(path, SETTINGS)
    with np.load(_saved(tmp_path), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    arrays["params"] = arrays["params"] + 1.0  # changed, checksum kept
    np.savez(path, **arrays)
    with pytest.raises(FileFormatError, match="fails its checksum"):
        load_state(path, SETTINGS)
    write_archive(path, json.dumps({"format": "dpdl-agent-checkpoint"}).encode(), {})
    with pytest.raises(FileFormatError, match="another format"):
        load_state(path, SETTINGS)


def _saved(folder: Path) -> Path:
    path = folder / "whole.npz"
    save_state(path, _state(), SETTINGS, "run")
    return path


def test_another_run_is_refused_naming_every_difference(tmp_path, monkeypatch) -> None:
    path = _saved(tmp_path)
    with pytest.raises(FileFormatError) as error:
        load_state(path, {**SETTINGS, "steps": 30, "lr": 0.2}, "run")
    message = str(error.value)
    assert "lr was 0.1 and is 0.2" in message and "steps was 20 and is 30" in message
    assert "mechanism" not in message and message.count(str(path)) == 1
    with pytest.raises(FileFormatError, match="data, graph or noise design differ"):
        load_state(path, SETTINGS, "another fingerprint")
    monkeypatch.setattr(checkpoints, "ENGINE_VERSION", checkpoints.ENGINE_VERSION + 1)
    with pytest.raises(FileFormatError, match="engine version"):
        load_state(path, SETTINGS, "run")
