"""Runs that fail loudly (issue 49, item 2).

Data files that are not finite, hold labels out of range or constant columns where the task
standardises are one `DataError` naming the file, the row or column and the problem, before any
work. A run whose state or metrics stop being finite (a step size of 1e308, a loss that returns
NaN) stops with a `DivergenceError` naming the step and the likely cause: the CLI exits 3 with one
``dpdl: error:`` line and marks its folder failed (``FAILED.json``, no ``final.json``), and a
resume of it is refused."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch
from hostile_helpers import assert_clear_error, tree
from torch import nn

from dpdl.cli import main
from dpdl.data import adult, housing, idx
from dpdl.data.a9a import read_libsvm
from dpdl.errors import DataError, DivergenceError
from dpdl.experiments.fit import fit

pytestmark = pytest.mark.hostile

SLICES = Path(__file__).resolve().parents[1] / "data"
TRAIN = ["train", "--graph", "ring", "--n", "4", "--steps", "4", "--eval-every", "2"]
TRAIN += ["--no-progress", "--out", "{out}"]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    try:
        code = main(args)
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


# ------------------------------------------------------------------------------- data files


def _housing_rows(rows: int = 6) -> list[list[str]]:
    rng = np.random.default_rng(0)
    table = rng.uniform(1.0, 100.0, size=(rows, len(housing.COLUMNS)))
    return [[f"{value:.4f}" for value in row] for row in table]


def _housing_text(rows: list[list[str]]) -> bytes:
    return gzip.compress(("\n".join(",".join(row) for row in rows) + "\n").encode())


def _housing_case(edit: Callable[[list[list[str]]], None]) -> bytes:
    rows = _housing_rows()
    edit(rows)
    return _housing_text(rows)


def _set(row: int, column: int, value: str) -> Callable[[list[list[str]]], None]:
    def edit(rows: list[list[str]]) -> None:
        rows[row][column] = value

    return edit


def _constant(column: int) -> Callable[[list[list[str]]], None]:
    def edit(rows: list[list[str]]) -> None:
        for row in rows:
            row[column] = "7.0"

    return edit


# name -> (content of cal_housing.data.gz, words the message must name)
HOUSING_CASES: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "nan-feature": (_housing_case(_set(2, 3, "nan")), ("row 3", "total_rooms", "nan")),
    "NaN-capitalised": (_housing_case(_set(0, 0, "NaN")), ("row 1", "longitude", "finite")),
    "inf-feature": (_housing_case(_set(4, 5, "inf")), ("row 5", "population", "inf")),
    "minus-inf": (_housing_case(_set(1, 7, "-inf")), ("row 2", "median_income", "inf")),
    "overflow-1e999": (
        _housing_case(_set(3, 2, "1e999")),
        (
            "row 4",
            "housing_median_age",
        ),
    ),
    "nan-target": (_housing_case(_set(5, 8, "nan")), ("row 6", "median_house_value", "nan")),
    "constant-feature": (_housing_case(_constant(4)), ("total_bedrooms", "constant")),
    "constant-target": (_housing_case(_constant(8)), ("median_house_value", "constant")),
    "one-row": (_housing_text(_housing_rows(1)), ("constant", "divides by zero")),
    "ragged-short-row": (
        _housing_case(lambda rows: rows[2].pop()),
        ("cal_housing.data.gz", "not a table"),
    ),
    "ragged-long-row": (
        _housing_case(lambda rows: rows[1].append("1.0")),
        ("cal_housing.data.gz", "not a table"),
    ),
    "ten-columns": (
        _housing_case(lambda rows: [row.append("1.0") for row in rows]),
        ("cal_housing.data.gz", "9 finite numbers"),
    ),
}


@pytest.mark.parametrize("name", HOUSING_CASES)
def test_bad_housing_values(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    content, words = HOUSING_CASES[name]
    (tmp_path / "california_housing").mkdir()
    path = tmp_path / "california_housing" / "cal_housing.data.gz"
    path.write_bytes(content)
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    housing._load.cache_clear()
    try:
        with pytest.raises(DataError) as caught:
            housing.load_california_housing()
    finally:
        housing._load.cache_clear()
    message = str(caught.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message


def _adult_rows(path: Path, lines: int) -> list[str]:
    with gzip.open(path, "rt") as handle:
        return [next(handle).rstrip("\n") for _ in range(lines)]


def _adult_edit(row: int, field: int, value: str) -> Callable[[list[str]], None]:
    def edit(rows: list[str]) -> None:
        fields = rows[row].split(",")
        fields[field] = f" {value}"
        rows[row] = ",".join(fields)

    return edit


def _adult_constant(field: int) -> Callable[[list[str]], None]:
    def edit(rows: list[str]) -> None:
        for k, row in enumerate(rows):
            fields = row.split(",")
            fields[field] = " 5"
            rows[k] = ",".join(fields)

    return edit


# name -> (edit of the first 40 training rows, words the message must name)
ADULT_CASES: dict[str, tuple[Callable[[list[str]], None], tuple[str, ...]]] = {
    "nan-age": (_adult_edit(3, 0, "nan"), ("row 4", "age", "nan")),
    "inf-fnlwgt": (_adult_edit(0, 2, "inf"), ("row 1", "fnlwgt", "inf")),
    "nan-hours": (_adult_edit(9, 12, "NaN"), ("row 10", "hours_per_week")),
    "constant-capital-gain": (_adult_constant(10), ("capital_gain", "constant")),
    "constant-age": (_adult_constant(0), ("age", "constant", "training rows")),
    "label-unknown": (_adult_edit(5, 14, "maybe"), ("row 6", "maybe", ">50K")),
    "label-number": (_adult_edit(7, 14, "1"), ("row 8", "'1'")),
    "ragged-row": (lambda rows: rows.__setitem__(2, rows[2] + ", extra"), ("3", "fields")),
}


@pytest.mark.parametrize("name", ADULT_CASES)
def test_bad_adult_values(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    edit, words = ADULT_CASES[name]
    folder = tmp_path / "adult"
    folder.mkdir()
    rows = _adult_rows(SLICES / "adult" / "adult.data.gz", 40)
    edit(rows)
    path = folder / "adult.data.gz"
    path.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    (folder / "adult.test.gz").write_bytes((SLICES / "adult" / "adult.test.gz").read_bytes())
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    adult._load.cache_clear()
    try:
        with pytest.raises(DataError) as caught:
            adult.load_adult("train")
    finally:
        adult._load.cache_clear()
    message = str(caught.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message


def _idx(values: np.ndarray, code: int = 0x08) -> bytes:
    dtype = {0x08: np.uint8, 0x0D: ">f4"}[code]
    header = bytes([0, 0, code, values.ndim]) + b"".join(
        int(size).to_bytes(4, "big") for size in values.shape
    )
    return gzip.compress(header + values.astype(dtype).tobytes())


_IMAGES = np.arange(3 * 28 * 28).reshape(3, 28, 28) % 256
_NAN_IMAGES = _IMAGES.astype(float)
_NAN_IMAGES[1, 4, 5] = np.nan

# name -> (images file, labels file, the file the message names, words it must name)
IDX_CASES: dict[str, tuple[bytes, bytes, str, tuple[str, ...]]] = {
    "label-10": (_idx(_IMAGES), _idx(np.array([1, 10, 2])), "labels", ("row 2", "10", "0..9")),
    "label-255": (_idx(_IMAGES), _idx(np.array([255, 0, 2])), "labels", ("row 1", "255")),
    "labels-2d": (_idx(_IMAGES), _idx(np.ones((3, 2))), "labels", ("one label", "(3, 2)")),
    "images-flat": (_idx(np.ones((3, 784))), _idx(np.ones(3)), "images", ("28", "(3, 784)")),
    "images-wrong-size": (_idx(np.ones((3, 14, 14))), _idx(np.ones(3)), "images", ("(3, 14",)),
    "images-none": (_idx(np.ones((0, 28, 28))), _idx(np.ones(0)), "images", ("(0, 28, 28)",)),
    "images-nan-pixel": (_idx(_NAN_IMAGES, 0x0D), _idx(np.ones(3)), "images", ("row 2", "nan")),
    "labels-float-nan": (
        _idx(_IMAGES),
        _idx(np.array([1.0, np.nan, 2.0]), 0x0D),
        "labels",
        ("row 2", "nan"),
    ),
}


@pytest.mark.parametrize("name", IDX_CASES)
def test_bad_idx_values(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    images, labels, which, words = IDX_CASES[name]
    folder = tmp_path / "mnist"
    folder.mkdir()
    (folder / "train-images-idx3-ubyte.gz").write_bytes(images)
    (folder / "train-labels-idx1-ubyte.gz").write_bytes(labels)
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    idx._read_pair.cache_clear()
    try:
        with pytest.raises(DataError) as caught:
            idx.load_idx_dataset("mnist", "train")
    finally:
        idx._read_pair.cache_clear()
    message = str(caught.value)
    assert str(folder / f"train-{which}-idx") in message, message
    for word in words:
        assert word in message, message


# name -> (LIBSVM text, words the message must name)
LIBSVM_CASES: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "label-zero": (b"+1 3:1 7:1\n0 2:1\n", ("row 2", "label", "-1, 1")),
    "label-two": (b"2 3:1\n-1 4:1\n", ("row 1", "2.0")),
    "label-nan": (b"-1 3:1\nnan 4:1\n", ("row 2", "nan")),
    "value-nan": (b"+1 3:nan 7:1\n-1 2:1\n", ("row 1", "feature 3", "nan")),
    "value-inf": (b"+1 3:1\n-1 5:inf\n", ("row 2", "feature 5", "inf")),
    "index-beyond-123": (b"+1 3:1 500:1\n", ("not an a9a file",)),
    "garbage": (b"hello world\n", ("not an a9a file",)),
    "empty": (b"", ("no rows",)),
    "blank-lines": (b"\n\n", ("no rows",)),
}


@pytest.mark.parametrize("name", LIBSVM_CASES)
def test_bad_libsvm_file(name: str, tmp_path: Path) -> None:
    content, words = LIBSVM_CASES[name]
    path = tmp_path / "a9a"
    path.write_bytes(content)
    with pytest.raises(DataError) as caught:
        read_libsvm(path)
    message = str(caught.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message


def test_constant_images_cannot_be_standardised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every training pixel alike (a blank image file): standardising divides by zero; the CLI
    says so before any work and writes nothing."""
    folder = tmp_path / "data" / "mnist"
    folder.mkdir(parents=True)
    for split, count in (("train", 40), ("t10k", 10)):
        blank = np.zeros((count, 28, 28))
        (folder / f"{split}-images-idx3-ubyte.gz").write_bytes(_idx(blank))
        (folder / f"{split}-labels-idx1-ubyte.gz").write_bytes(_idx(np.arange(count) % 10))
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path / "data"))
    idx._read_pair.cache_clear()
    out = tmp_path / "out"
    args = [a.format(out=out) for a in TRAIN] + ["--task", "mnist-mlp", "--batch-size", "4"]
    try:
        code, stderr = _run(args, capsys)
    finally:
        idx._read_pair.cache_clear()
    assert_clear_error(code, stderr, "divides by zero", args)
    assert tree(out) == []


# ------------------------------------------------------------------------ runs that diverge


def assert_diverged(code: object, stderr: str, out: Path, args: list[str], *words: str) -> dict:
    """Exit status 3, no traceback, one ``dpdl: error:`` line naming the step and `words`, and the
    folder marked failed: ``FAILED.json`` with the step, and no ``final.json``."""
    detail = f"args={args}\nstderr={stderr!r}"
    assert "Traceback" not in stderr, detail
    assert code == DivergenceError.exit_status == 3, f"exit status {code!r}\n{detail}"
    errors = [line for line in stderr.splitlines() if line.startswith("dpdl: error:")]
    assert len(errors) == 1, detail
    assert "step " in errors[0], detail
    assert "not finite" in errors[0] or "metric" in errors[0], detail
    for word in words:
        assert word in errors[0], detail
    assert not (out / "final.json").exists(), tree(out)
    failed = json.loads((out / "FAILED.json").read_text())
    assert isinstance(failed["step"], int) and failed["step"] >= 0, failed
    assert failed["message"] in errors[0], (failed, errors)
    return failed


# name -> (options, words the error must name)
DIVERGENT: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "quadratic-none": (["--task", "quadratic", "--mechanism", "none"], ("step size",)),
    "quadratic-ldp": (["--task", "quadratic", "--mechanism", "ldp"], ("step size",)),
    "quadratic-cdp": (["--task", "quadratic", "--mechanism", "cdp"], ("step size",)),
    "quadratic-decor": (["--task", "quadratic", "--mechanism", "decor"], ("step size",)),
    "quadratic-whisper": (["--task", "quadratic", "--mechanism", "whisper"], ("step size",)),
    "quadratic-zero-sum": (["--task", "quadratic", "--mechanism", "zero-sum"], ("step size",)),
    "least-squares-ldp": (["--task", "least-squares", "--mechanism", "ldp"], ("step size",)),
    "logreg-ldp": (["--task", "logreg-a9a", "--mechanism", "ldp"], ("step size",)),
    "logreg-none-sched": (
        ["--task", "logreg-a9a", "--mechanism", "none", "--schedule", "inv-sqrt"],
        ("step size",),
    ),
    "dsgt-none": (
        ["--task", "quadratic", "--algorithm", "dsgt", "--mechanism", "none"],
        ("step size",),
    ),
    "dsgt-lppa": (
        ["--task", "quadratic", "--algorithm", "dsgt", "--mechanism", "lppa"],
        ("step size",),
    ),
    "housing-mlp": (
        ["--task", "housing-mlp", "--mechanism", "ldp", "--batch-size", "8"],
        ("step size",),
    ),
    "mnist-linear": (
        ["--task", "mnist-linear", "--mechanism", "none", "--batch-size", "8"],
        ("step size",),
    ),
    "two-seeds": (
        ["--task", "quadratic", "--mechanism", "none", "--seed", "3", "4"],
        ("seed 3",),
    ),
}


@pytest.mark.parametrize("name", DIVERGENT)
def test_step_size_too_large_fails_loudly(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    options, words = DIVERGENT[name]
    monkeypatch.setenv("DPDL_DATA_DIR", str(SLICES))
    out = tmp_path / "run"
    args = [a.format(out=out) for a in TRAIN] + options + ["--lr", "1e308"]
    code, stderr = _run(args, capsys)
    assert_diverged(code, stderr, out, args, *words)


def test_sparse_engine_diverges_loudly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1000 agents: the sparse mixing path (`dpdl.scale.SPARSE_MIN_AGENTS`) checks as well."""
    out = tmp_path / "run"
    args = [a.format(out=out) for a in TRAIN] + ["--task", "quadratic", "--mechanism", "none"]
    args[args.index("--n") + 1] = "1000"
    code, stderr = _run([*args, "--lr", "1e308", "--dim", "2"], capsys)
    assert_diverged(code, stderr, out, args, "step size")


def test_diverged_run_is_not_resumed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its checkpoints would diverge again: `--resume` is refused, naming FAILED.json."""
    out = tmp_path / "run"
    args = [a.format(out=out) for a in TRAIN] + ["--task", "quadratic", "--lr", "1e308"]
    args += ["--checkpoint-every", "1", "--mechanism", "none"]
    code, stderr = _run(args, capsys)
    assert_diverged(code, stderr, out, args)
    code, stderr = _run([*args, "--resume"], capsys)
    assert_clear_error(code, stderr, "FAILED.json", args)
    assert not (out / "final.json").exists()


def test_good_run_after_a_diverged_one_clears_the_mark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = [a.format(out=out) for a in TRAIN] + ["--task", "quadratic", "--mechanism", "none"]
    code, stderr = _run([*args, "--lr", "1e308"], capsys)
    assert_diverged(code, stderr, out, args)
    # another run's folder: taken only with --overwrite (one run per folder), which clears it
    code, stderr = _run([*args, "--lr", "0.01", "--overwrite"], capsys)
    assert code == 0, stderr
    assert (out / "final.json").is_file() and not (out / "FAILED.json").exists()


def test_sweep_point_that_diverges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep keeps the point as a failed row, runs the others, names it at the end, and
    exits 3 (every failure a divergence)."""
    sweep = tmp_path / "s.toml"
    sweep.write_text(
        '[base]\ntask = "quadratic"\nn = 4\ngraph = "ring"\nsteps = 3\nmechanism = "none"\n'
        "[sweep]\nlr = [0.01, 1e308]\n"
    )
    out = tmp_path / "sweep"
    code, stderr = _run(["sweep", str(sweep), "--out", str(out), "--no-progress"], capsys)
    assert code == 3, stderr
    assert "DivergenceError" in stderr and "failed:" in stderr, stderr
    rows = (out / "runs.csv").read_text()
    assert rows.count("DivergenceError") == 1, rows


# ------------------------------------------------------------------------------ the Python API


def _data() -> tuple[np.ndarray, np.ndarray]:
    """32 examples of 3 classes; class 2 (every other example from the third on) is the one the
    bad losses below fail on, so `fit`'s probe of the first two examples passes and the run
    meets the failure only once it trains."""
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(32, 3)).astype(np.float32)
    targets = (inputs[:, 0] > 0).astype(np.int64)
    targets[2::2] = 2
    return inputs, targets


def _cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(outputs, targets, reduction="none")


def _nan_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return _cross_entropy(outputs, targets) * torch.where(targets == 2, float("nan"), 1.0)


def _inf_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return _cross_entropy(outputs, targets) * torch.where(targets == 2, float("inf"), 1.0)


def _log_of_negative(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.log(torch.where(targets == 2, -1.0, 1.0) * torch.exp(outputs[:, 0]))


# name -> (loss, step size, words the message must name)
FIT_CASES: dict[str, tuple[Callable, float, tuple[str, ...]]] = {
    "loss-nan": (_nan_loss, 0.1, ("metric",)),
    "loss-inf": (_inf_loss, 0.1, ("metric",)),
    "loss-log-negative": (_log_of_negative, 0.1, ("nan",)),
    "step-size-1e308": (_cross_entropy, 1e308, ("step size",)),
    "step-size-1e200": (_cross_entropy, 1e200, ("step size",)),
}


@pytest.mark.parametrize("name", FIT_CASES)
def test_fit_that_diverges(name: str) -> None:
    loss, lr, words = FIT_CASES[name]
    inputs, targets = _data()
    torch.manual_seed(0)
    with pytest.raises(DivergenceError) as caught:
        fit(
            nn.Linear(3, 3), loss, train=(inputs, targets), test=(inputs, targets),
            graph=nx.cycle_graph(4), mechanism="none", steps=4, lr=lr, batch_size=4,
            eval_every=2,
        )  # fmt: skip
    message = str(caught.value)
    assert message.startswith("step "), message
    assert isinstance(caught.value.step, int)
    for word in words:
        assert word in message, message


def test_fit_gradient_nan_names_the_gradient() -> None:
    """A loss whose value is finite but whose gradient is NaN (the square root's at 0): the
    error names the first step and the gradient."""
    inputs, targets = _data()

    def sqrt_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # sqrt(0) on class 2: a finite value whose gradient is NaN
        zero_on_class_2 = outputs.abs().sum(dim=1) * (targets != 2)
        return torch.sqrt(zero_on_class_2) + _cross_entropy(outputs, targets)

    with pytest.raises(DivergenceError) as caught:
        fit(
            nn.Linear(3, 3, bias=False), sqrt_loss, train=(inputs, targets),
            test=(inputs, targets), graph=nx.cycle_graph(4), mechanism="none", steps=3,
            lr=0.1, batch_size=8,
        )  # fmt: skip
    message = str(caught.value)
    assert "gradient" in message and "step 1" in message, message
