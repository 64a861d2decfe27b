"""Files dpdl reads back cannot run code or lie: runtime checkpoints are checksummed data of one
run, batch streams resume exactly from them, and writes are atomic."""

from __future__ import annotations

import ast
import io
import os
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpdl.errors import FileFormatError
from dpdl.experiments.train import TrainConfig, build_job
from dpdl.files import atomic_write
from dpdl.jobspec.sampling import AgentBatches, CyclicSampler, PoissonSampler, UniformSampler
from dpdl.runtime import AgentOptions, checkpoint, run_local
from dpdl.runtime.agent import checkpoint_path
from dpdl.runtime.checkpoint import AgentState, load_checkpoint, run_fingerprint, save_checkpoint

SIZES = np.array([40, 55, 70])
BUILDERS = {
    "uniform": lambda sizes: UniformSampler(sizes, 8),
    "poisson": lambda sizes: PoissonSampler(sizes, 8),
    "cyclic": lambda sizes: CyclicSampler(sizes, 4),
}


class _Marker:
    """A pickle that, when loaded, creates the file ``path`` (``open(path, "w")``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (open, (str(self.path), "w"))


@pytest.mark.parametrize("sampler", list(BUILDERS))
@pytest.mark.parametrize("drawn", [0, 6])
def test_a_batch_stream_resumes_from_its_checkpoint_exactly(
    tmp_path: Path, sampler: str, drawn: int
) -> None:
    batches = AgentBatches(SIZES, BUILDERS[sampler], 5, [1, 2])
    for _ in range(drawn):
        batches.sample()
    save_checkpoint(
        tmp_path / "c.ckpt", [AgentState(drawn, np.arange(3.0), batches.state())], "run", 1
    )
    [state] = load_checkpoint(tmp_path / "c.ckpt", "run", 1)
    assert state.round == drawn and np.array_equal(state.params, np.arange(3.0))
    resumed = AgentBatches(SIZES, BUILDERS[sampler], 5, [1, 2])
    fresh = resumed.sample()
    resumed.set_state(*state.batches)
    for step in range(9):  # more than a cycle
        expected, got = batches.sample(), resumed.sample()
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_array_equal(got.weights, expected.weights)
        if step == 0 and drawn:  # the restored stream is not the fresh one
            assert not np.array_equal(got.indices, fresh.indices)


def test_a_batch_state_of_other_batches_is_refused() -> None:
    cyclic = AgentBatches(SIZES, BUILDERS["cyclic"], 5, [1])
    cyclic.sample()
    generators, arrays = cyclic.state()
    with pytest.raises(ValueError, match="keeps no state"):
        AgentBatches(SIZES, BUILDERS["uniform"], 5, [1]).set_state(generators, arrays)
    with pytest.raises(ValueError, match="agents"):
        AgentBatches(SIZES, BUILDERS["cyclic"], 5, [2]).set_state(generators, arrays)
    with pytest.raises(ValueError, match="not a PCG64 state"):
        AgentBatches(SIZES, BUILDERS["cyclic"], 5, [1]).set_state(
            {"1": {**generators["1"], "state": 3}}, arrays
        )
    with pytest.raises(ValueError, match=r"indices lie in \[0, 55\)"):
        AgentBatches(SIZES, BUILDERS["cyclic"], 5, [1]).set_state(
            generators, {**arrays, "1/indices": arrays["1/indices"] + 50}
        )
    other = AgentBatches(
        SIZES, BUILDERS["cyclic"], 5, [2]
    )  # 70 examples in batches of 18, agent 1's 55 in 14
    other.sample()
    generators, arrays = other.state()
    relabelled = (
        {"1": generators["2"]},
        {"1/" + name.partition("/")[2]: array for name, array in arrays.items()},
    )
    with pytest.raises(ValueError, match=r"shape \(4, 1, 14\)"):
        AgentBatches(SIZES, BUILDERS["cyclic"], 5, [1]).set_state(*relabelled)


def _good_checkpoint(path: Path) -> None:
    batches = AgentBatches(SIZES, BUILDERS["uniform"], 5, [1])
    save_checkpoint(
        path, [AgentState(t, np.full(4, float(t)), batches.state()) for t in (10, 20)], "run", 1
    )


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("truncated", "not a readable checkpoint"),
        ("empty", "not a readable checkpoint"),
        ("random", "not a readable checkpoint"),
        ("pickle", "not a readable checkpoint"),
        ("npy", "not an .npz archive"),
        ("foreign-npz", "without manifest and checksum"),
        ("flipped-byte", "Bad CRC-32"),  # the archive's own check
        ("edited", "fails its checksum"),  # rewritten as a whole archive: ours
        ("other-agent", "checkpoint of agent 1, not of agent 2"),
        ("other-run", "belongs to another run"),
        ("older-engine", "engine version"),
    ],
)
def test_a_checkpoint_that_is_not_this_runs_is_refused_naming_the_file(
    tmp_path: Path, monkeypatch, damage: str, words: str
) -> None:
    path = tmp_path / "agent1" / "periodic.ckpt"
    _good_checkpoint(path)
    whole = path.read_bytes()
    agent, run = 1, "run"
    if damage == "truncated":
        path.write_bytes(whole[: len(whole) * 2 // 3])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "random":
        path.write_bytes(np.random.default_rng(0).bytes(len(whole)))
    elif damage == "pickle":
        path.write_bytes(pickle.dumps([{"round": 10, "params": np.zeros(4)}]))
    elif damage == "npy":
        np.save(path.with_suffix(".npy"), np.zeros(4))
        path.with_suffix(".npy").replace(path)
    elif damage == "foreign-npz":
        path.write_bytes(_npz(params=np.zeros(4), round=np.array(10)))
    elif damage == "flipped-byte":
        at = whole.index(np.full(4, 20.0).tobytes())  # inside the parameters of round 20
        path.write_bytes(whole[:at] + bytes([whole[at] ^ 1]) + whole[at + 1 :])
    elif damage == "edited":
        with np.load(path) as archive:
            arrays = {name: archive[name] for name in archive.files}
        arrays["state1/params"] = np.full(4, 21.0)
        path.write_bytes(_npz(**arrays))
    elif damage == "other-agent":
        agent = 2
    elif damage == "other-run":
        run = "another run"
    elif damage == "older-engine":
        monkeypatch.setattr(checkpoint, "ENGINE_VERSION", checkpoint.ENGINE_VERSION + 1)
    with pytest.raises(FileFormatError, match=words) as refused:
        load_checkpoint(path, run, agent)
    assert str(path) in str(refused.value)
    # the same file undamaged loads
    path.write_bytes(whole)
    monkeypatch.undo()
    assert [s.round for s in load_checkpoint(path, "run", 1)] == [10, 20]


def test_the_run_fingerprint_names_the_configuration_seed_and_design() -> None:
    config = TrainConfig(
        task="least-squares", graph="ring", n=4, mechanism="decor", eps=5.0, steps=20
    ).resolved()
    job = build_job(config, 0)
    same = run_fingerprint(config, 0, job)
    assert (
        run_fingerprint(replace(config, seeds=(0, 1, 2)), 0, build_job(config, 0)) == same
    )  # the seed run, not the list
    assert run_fingerprint(config, 1, build_job(config, 1)) != same
    other = replace(config, eps=6.0)
    assert run_fingerprint(other, 0, build_job(other, 0)) != same
    assert run_fingerprint(replace(config, steps=30), 0, job) != same


def test_a_crafted_pickle_where_a_checkpoint_is_expected_runs_no_code(tmp_path: Path) -> None:
    """A pickle whose loading would create a file is placed as every agent's checkpoint: the resume
    stops with an error naming the file, and the file was not created."""
    live = tmp_path / "proof-the-payload-is-live"
    pickle.loads(pickle.dumps(_Marker(live)))  # what unpickling this payload does
    assert live.exists()
    marker = tmp_path / "code-ran"
    config = TrainConfig(
        task="logreg-a9a",
        graph="ring",
        n=4,
        mechanism="decor",
        eps=5.0,
        steps=20,
        eval_every=20,
        key_seed=3,
    )
    options = AgentOptions(tmp_path / "run", key_seed=3, timeout=30.0, checkpoint_every=10)
    for agent in range(4):
        path = checkpoint_path(options.workdir, agent, "periodic")
        path.parent.mkdir(parents=True)
        path.write_bytes(pickle.dumps(_Marker(marker)))
    outcome = run_local(config, 0, replace(options, resume=True))
    assert set(outcome.errors) == {0, 1, 2, 3} and outcome.models is None
    for agent, error in outcome.errors.items():
        assert (
            f"{checkpoint_path(options.workdir, agent, 'periodic')} is not a readable checkpoint"
            in error
        )
    assert not marker.exists()


def test_resuming_with_another_configuration_is_refused(tmp_path: Path) -> None:
    config = TrainConfig(
        task="least-squares",
        graph="ring",
        n=4,
        mechanism="decor",
        eps=5.0,
        steps=20,
        eval_every=20,
        key_seed=3,
    )
    options = AgentOptions(tmp_path, key_seed=3, timeout=30.0, checkpoint_every=10)
    assert run_local(config, 0, options).errors == {}
    # refused once, by the launcher, before any agent starts, naming what differs
    with pytest.raises(FileFormatError, match=r"other settings \(eps was 5.0 and is 6.0\)"):
        run_local(replace(config, eps=6.0), 0, replace(options, resume=True))
    assert run_local(config, 0, replace(options, resume=True)).errors == {}  # its own run resumes


def test_an_interrupted_write_leaves_the_previous_file_whole(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "entry.json"
    atomic_write(path, b"old")

    def power_cut(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", power_cut)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write(path, b"new contents")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["entry.json"]


def test_the_package_unpickles_nothing() -> None:
    """No module of dpdl imports a pickle-based loader, calls torch.load, or lets numpy unpickle."""
    offenders = []
    for source in sorted(Path(checkpoint.__file__).parents[1].rglob("*.py")):
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(
                name.split(".")[0]
                in ("pickle", "cPickle", "dill", "joblib", "shelve", "cloudpickle")
                for name in names
            ):
                offenders.append(f"{source}:{node.lineno} imports {names}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "load"
                and isinstance(node.value, ast.Name)
                and node.value.id == "torch"
            ):
                offenders.append(f"{source}:{node.lineno} torch.load")
            if (
                isinstance(node, ast.keyword)
                and node.arg == "allow_pickle"
                and not (isinstance(node.value, ast.Constant) and node.value.value is False)
            ):
                offenders.append(f"{source}:{node.lineno} allow_pickle other than False")
    assert offenders == []


def test_a_checksummed_state_that_does_not_fit_the_run_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    """The checksum says a file is whole, not that its contents fit: the agent checks the
    parameters' shape and that its batch streams accept the state (numpy's own range checks
    included)."""
    from dpdl.runtime.agent import _restore

    batches = AgentBatches(SIZES, BUILDERS["uniform"], 5, [1])
    generators, arrays = batches.state()
    out_of_range = {"1": {**generators["1"], "state": {**generators["1"]["state"], "state": -5}}}
    path = tmp_path / "periodic.ckpt"
    save_checkpoint(
        path,
        [
            AgentState(10, np.zeros(4), (out_of_range, arrays)),
            AgentState(20, np.zeros(4), batches.state()),
        ],
        "run",
        1,
    )
    bad, good = load_checkpoint(path, "run", 1)
    with pytest.raises(FileFormatError, match=f"{path}: the batch streams of round 10 do not fit"):
        _restore(path, bad, (4,), AgentBatches(SIZES, BUILDERS["uniform"], 5, [1]))
    with pytest.raises(FileFormatError, match=r"round 20 have shape \(4,\), this run's \(3, 4\)"):
        _restore(path, good, (3, 4), AgentBatches(SIZES, BUILDERS["uniform"], 5, [1]))
    with pytest.raises(FileFormatError, match="has the batch streams this run lacks"):
        _restore(path, good, (4,), None)
    _restore(path, good, (4,), AgentBatches(SIZES, BUILDERS["uniform"], 5, [1]))
