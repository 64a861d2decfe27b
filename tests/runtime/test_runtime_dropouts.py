"""Dropouts in the runtime: the agents of `run-local` miss the rounds of the schedule the
simulation misses, and reach the models of `dpdl train` (agents drawing from their seeds)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpdl.cli import main
from dpdl.errors import ConfigError
from dpdl.experiments.train import TrainConfig, run_training
from dpdl.jobspec.dropouts import DropoutSchedule
from dpdl.runtime import AgentOptions, run_local
from dpdl.runtime.agent import run_record_path

KEY_SEED = 11
ROUNDS = 8


def _config(tmp_path: Path, source: str, recovery: bool) -> TrainConfig:
    """DECOR on a ring of 5 over a9a, its dropouts drawn at rate 0.3 or read from a file (agent
    2 misses rounds 2 and 3, agent 3 round 3, agent 0 the last)."""
    config = TrainConfig(
        task="logreg-a9a",
        graph="ring",
        n=5,
        mechanism="decor",
        eps=5.0,
        steps=ROUNDS,
        eval_every=ROUNDS,
        batch_size=64,
        key_seed=KEY_SEED,
    )
    if source == "rate":
        return replace(config, dropout=0.3, dropout_recovery=recovery)
    path = tmp_path / "schedule.csv"
    path.write_text(f"round,agent\n2,2\n3,2\n3,3\n{ROUNDS},0\n")
    return replace(config, dropout_schedule=str(path), dropout_recovery=recovery)


@pytest.mark.parametrize(
    ("source", "recovery"), [("rate", True), ("rate", False), ("file", False), ("file", True)]
)
def test_run_local_misses_the_rounds_dpdl_train_misses_and_reaches_its_models(
    tmp_path: Path, source: str, recovery: bool
) -> None:
    config = _config(tmp_path, source, recovery)
    simulated = run_training(config).runs[0]
    assert simulated.dropouts is not None and simulated.dropouts.missed >= 3
    outcome = run_local(config, 0, AgentOptions(tmp_path / "run", key_seed=KEY_SEED, timeout=60.0))
    assert outcome.errors == {} and outcome.models is not None
    np.testing.assert_allclose(outcome.models, simulated.models, rtol=1e-9, atol=1e-11)
    assert outcome.dropouts is not None
    np.testing.assert_array_equal(outcome.dropouts.alive, simulated.dropouts.alive)
    # both state what the run spent under that schedule, not the design's guarantee
    assert outcome.privacy == [report.as_dict() for report in simulated.privacy]
    assert simulated.design_privacy is not None
    assert [r.epsilon for r in simulated.privacy] != [r.epsilon for r in simulated.design_privacy]
    for agent in range(5):  # each agent records the rounds it missed
        record = json.loads(run_record_path(tmp_path / "run", agent).read_text())
        missed = np.flatnonzero(~simulated.dropouts.alive[:, agent]) + 1
        assert record["missed_rounds"] == missed.tolist()
    # the dropouts mattered: the run without them, and the other noise design, differ
    plain = run_training(
        replace(config, dropout=0.0, dropout_schedule=None, dropout_recovery=False)
    ).runs[0]
    assert np.abs(plain.models - simulated.models).max() > 1e-6
    other = run_training(replace(config, dropout_recovery=not recovery))
    assert np.abs(other.runs[0].models - simulated.models).max() > 1e-6


def test_run_local_writes_the_schedule_that_replays_its_dropouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dpdl run-local --dropout` writes dropouts.csv and records the dropouts in final.json; the
    same job run with `--dropout-schedule dropouts.csv` reaches the same models."""
    common = [
        "--task", "least-squares", "--graph", "ring", "--n", "4", "--mechanism", "decor",
        "--eps", "5", "--steps", "6", "--eval-every", "6", "--key-seed", str(KEY_SEED),
        "--no-progress", "--dropout-recovery",
    ]  # fmt: skip
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["run-local", *common, "--dropout", "0.4", "--workdir", str(first)]) == 0
    final = json.loads((first / "final.json").read_text())
    schedule = DropoutSchedule.from_file(first / "dropouts.csv", 4, 6)
    assert final["dropouts"]["missed_rounds"] == schedule.missed > 0
    said = f"dropouts (rate 0.4, seed 0): {schedule.missed} agent-rounds missed"
    assert said in capsys.readouterr().err
    assert final["dropouts"]["dropouts"] == "rate 0.4, seed 0"
    replay = ["--dropout-schedule", str(first / "dropouts.csv"), "--workdir", str(second)]
    assert main(["run-local", *common, *replay]) == 0
    np.testing.assert_array_equal(np.load(second / "models.npy"), np.load(first / "models.npy"))
    assert (second / "dropouts.csv").read_bytes() == (first / "dropouts.csv").read_bytes()


def test_dropouts_and_departures_are_refused_before_any_agent_starts(tmp_path: Path) -> None:
    config = replace(_config(tmp_path, "rate", False), steps=4)
    options = AgentOptions(tmp_path / "run", key_seed=KEY_SEED, resume=True, departed=(2,))
    with pytest.raises(ConfigError, match=r"dropouts .* and departures .* do not combine"):
        run_local(config, 0, options)
    assert not (tmp_path / "run").exists()
