"""Metrics as they happen (:mod:`dpdl.experiments.tensorboard`): the event files that fit's
callbacks, ``dpdl train --tensorboard`` and ``dpdl sweep --tensorboard`` write hold every metric
of every record at its step, as TensorBoard reads them back; without the package, one error says
how to install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn
from torch.nn import functional

import dpdl
from dpdl.errors import MissingDependencyError
from dpdl.experiments.results import read_rows
from dpdl.experiments.sweeps.run import run_sweep
from dpdl.experiments.sweeps.spec import read_sweep
from dpdl.experiments.tensorboard import SeedLogs, TensorBoardLog

ROOT = Path(__file__).resolve().parents[2]


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series in the event files of ``folder``: tag -> [(step, value), ...]."""
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {
        tag: [(event.step, event.value) for event in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
    }


def _expected(history: list[dict[str, float]]) -> dict[str, list[tuple[int, float]]]:
    keys = [key for key in history[0] if key != "step"]
    return {key: [(int(r["step"]), r[key]) for r in history] for key in keys}


def _close(got: dict, expected: dict) -> None:
    """The same tags and steps; values as float32, the precision of TensorBoard's scalars."""
    assert set(got) == set(expected)
    for tag, series in expected.items():
        assert [step for step, _ in got[tag]] == [step for step, _ in series], tag
        np.testing.assert_array_equal(
            np.float32([value for _, value in got[tag]]),
            np.float32([value for _, value in series]),
        )


def test_fit_callbacks_write_every_record_for_tensorboard(tmp_path) -> None:
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(120, 4)).astype(np.float32)
    labels = (inputs[:, 0] > 0).astype(np.int64)
    torch.manual_seed(0)
    seen: list[int] = []
    with TensorBoardLog(tmp_path / "tb") as log:
        result = dpdl.fit(
            nn.Linear(4, 2),
            lambda out, y: functional.cross_entropy(out, y, reduction="none"),
            (inputs[:90], labels[:90]),
            (inputs[90:], labels[90:]),
            nx.cycle_graph(4),
            mechanism="ldp",
            eps=5.0,
            steps=12,
            eval_every=4,
            progress=False,
            callbacks=[log, lambda step, metrics: seen.append(step)],
        )
    assert seen == [0, 4, 8, 12]
    _close(_scalars(tmp_path / "tb"), _expected(result.history))


def test_train_writes_each_seed_as_a_run_and_the_csv_as_before(tmp_path) -> None:
    out, logs = tmp_path / "out", tmp_path / "tb"
    subprocess.run(
        [sys.executable, "-m", "dpdl.cli", "train", "--task", "quadratic", "--n", "5",
         "--steps", "20", "--eval-every", "5", "--eps", "3", "--seed", "0", "1", "--out",
         str(out), "--tensorboard", str(logs), "--no-progress"],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    rows = read_rows(out / "metrics.csv")
    assert sorted(path.name for path in logs.iterdir()) == ["seed0", "seed1"]
    for seed in (0, 1):
        history = [{k: v for k, v in row.items() if k != "seed"} for row in rows]
        history = [r for r, row in zip(history, rows, strict=True) if row["seed"] == seed]
        _close(_scalars(logs / f"seed{seed}"), _expected(history))


def test_a_sweep_writes_each_point_it_runs(tmp_path) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(
        '[base]\ntask = "quadratic"\nn = 5\nsteps = 10\neval-every = 5\n\n'
        '[sweep]\nmechanism = ["ldp", "decor"]\n'
    )
    result = run_sweep(
        read_sweep(path), tmp_path / "out", workers=1, progress=False, tensorboard=tmp_path / "tb"
    )
    points = {row["point"] for row in result.rows}
    assert {p.name for p in (tmp_path / "tb").iterdir()} == points
    for row in result.rows:
        scalars = _scalars(tmp_path / "tb" / row["point"] / "seed0")
        assert [step for step, _ in scalars["optimality_gap"]] == [0, 5, 10]
        assert np.float32(scalars["optimality_gap"][-1][1]) == np.float32(row["optimality_gap"])


def test_without_tensorboard_one_error_names_the_extra(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # import tensorboard fails
    for make in (TensorBoardLog, SeedLogs):
        with pytest.raises(MissingDependencyError, match=r"pip install 'dpdl\[tensorboard\]'"):
            make(tmp_path / "tb")
    assert not (tmp_path / "tb").exists()
