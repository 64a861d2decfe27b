"""One run per results folder (issue 49, item 3): `dpdl train` into the folder of an earlier run
with other options is refused instead of leaving the earlier seed's models beside the new
results, `--overwrite` clears it first, and a sweep of the same file into its own folder continues
while another sweep's folder is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpdl.cli import main

TRAIN = ["train", "--task", "quadratic", "--graph", "ring", "--n", "3", "--steps", "2"]
TRAIN += ["--no-progress", "--save-models"]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def test_train_into_an_earlier_seeds_folder_is_refused_and_overwrite_clears_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _run([*TRAIN, "--seed", "0", "--out", str(out)], capsys)[0] == 0
    assert (out / "models" / "seed0").is_dir()
    code, stderr = _run([*TRAIN, "--seed", "1", "--out", str(out)], capsys)
    assert code == 2 and "seed was [0] and is [1]" in stderr, stderr
    assert not (out / "models" / "seed1").exists()
    assert json.loads((out / "final.json").read_text())  # the earlier run's, untouched
    assert _run([*TRAIN, "--seed", "1", "--out", str(out), "--overwrite"], capsys)[0] == 0
    assert sorted(p.name for p in (out / "models").iterdir()) == ["seed1"]
    assert _run([*TRAIN, "--seed", "1", "--out", str(out)], capsys)[0] == 0  # the same run again


SWEEP = '[base]\ntask = "quadratic"\ngraph = "ring"\nn = 3\nsteps = 2\n[sweep]\nseed = [0, 1]\n'


def test_a_sweep_continues_in_its_own_folder_and_another_sweeps_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, other = tmp_path / "first.toml", tmp_path / "other.toml"
    first.write_text(SWEEP)
    other.write_text(SWEEP.replace("[0, 1]", "[0, 1, 2]"))
    out = tmp_path / "sweep"
    common = ["--no-progress", "--jobs", "1", "--out", str(out)]
    assert main(["sweep", str(first), *common]) == 0
    points = sorted(p.name for p in (out / "points").iterdir())
    first.write_text(SWEEP.replace("[0, 1]", "[0, 1, 2]"))  # the same sweep, a point added
    assert main(["sweep", str(first), *common]) == 0
    now = sorted(p.name for p in (out / "points").iterdir())
    assert set(points) < set(now) and len(now) == 3  # the finished points were kept
    capsys.readouterr()
    code, stderr = _run(["sweep", str(other), *common], capsys)
    assert code == 2 and "sweep was 'first' and is 'other'" in stderr, stderr
