"""The ``dpdl`` command line: bad input gives one ``dpdl: error:`` line, never a traceback.

Each dpdl process spends 2-3 s of CPU importing its dependencies, so only a few commands run as
real subprocesses (started at once by a module fixture, in parallel): ``dpdl --help`` through the
installed console script, one argument-parser error, one error raised inside a run, and the
training smoke test. Every bad input is also checked in-process through :func:`dpdl.cli.main`, with
the same criteria: a non-zero exit status, exactly one stderr line starting with ``dpdl: error:``,
and no exception escaping ``main`` (which is what prints a traceback in a real process).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dpdl.cli import main

TIMEOUT = 180  # seconds per subprocess; they normally end within seconds

DISCONNECTED_EDGES = "# two triangles\n0 1\n1 2\n2 0\n3 4\n4 5\n5 3\n"

# name -> (train arguments, a word the error message must contain)
ERROR_CASES: dict[str, tuple[list[str], str]] = {
    "eps-zero": (["--eps", "0"], "epsilon"),
    "eps-negative": (["--eps", "-1"], "epsilon"),
    "delta-zero": (["--delta", "0"], "delta"),
    "delta-above-one": (["--delta", "1.5"], "delta"),
    "unknown-task": (["--task", "unknown"], "--task"),
    "missing-edgelist": (["--graph", "edgelist:/nonexistent/file.txt"], "not found"),
    "disconnected-edgelist": (["--graph", "edgelist:{disconnected}"], "disconnected"),
    "unknown-mechanism": (["--mechanism", "unknown"], "mechanism"),
    "er-no-connected-draw": (["--graph", "er", "--p", "0.001", "--n", "50"], "Erdos-Renyi"),
    "clip-zero": (["--clip", "0"], "clip"),
    "steps-zero": (["--steps", "0"], "--steps"),  # rejected by the argument parser itself
    "alpha-zero": (["--partition", "dirichlet", "--alpha", "0"], "alpha"),
    "torus-prime-n": (["--graph", "torus", "--n", "7"], "torus"),
    "unknown-real-graph": (["--graph", "no-such-graph"], "unknown"),
    "negative-seed": (["--seed", "-1"], "seed"),
    "tracking-with-a-calibrated-design": (
        ["--algorithm", "dsgt", "--mechanism", "whisper"],
        "gradient tracking",
    ),
    "tracking-noise-zero": (
        ["--algorithm", "dsgt", "--mechanism", "lppa", "--tracking-noise", "0"],
        "scale",
    ),
    "negative-key-seed": (["--key-seed", "-2"], "key seed"),
    "step-schedule-without-decay": (["--schedule", "step"], "--decay-after"),
    "decay-without-step-schedule": (["--decay-after", "5"], "--schedule"),
    "decay-factor-without-step-schedule": (["--decay-factor", "0.5"], "--decay-factor"),
    "decay-after-zero": (["--schedule", "step", "--decay-after", "0"], "--decay-after"),
    "horizon-of-a-step-decay": (
        [
            "--mechanism",
            "whisper",
            "--objective",
            "horizon",
            "--schedule",
            "step",
            "--decay-after",
            "5",
        ],
        "unweighed step-size schedule 'step'",
    ),
}


def train_args(name: str, out: Path, disconnected: Path) -> list[str]:
    extra = [arg.format(disconnected=disconnected) for arg in ERROR_CASES[name][0]]
    steps = [] if "--steps" in extra else ["--steps", "10"]
    return ["train", *extra, *steps, "--out", str(out / name)]


@dataclass
class Result:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def assert_one_line_error(result: Result, keyword: str) -> None:
    detail = f"args={result.args}\nstdout={result.stdout!r}\nstderr={result.stderr!r}"
    assert "Traceback" not in result.stderr, detail
    assert result.returncode not in (0, None), detail
    lines = result.stderr.splitlines()
    assert len(lines) == 1, detail
    assert lines[0].startswith("dpdl: error:"), detail
    assert keyword.lower() in lines[0].lower(), detail


# --------------------------------------------------------------------------- in-process, every case


@pytest.fixture
def run_main(capsys, monkeypatch):
    """Call dpdl.cli.main like the console script does; an escaping exception fails the test."""
    # main() installs its own warning format; put the original back afterwards
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)

    def run(args: list[str]) -> Result:
        capsys.readouterr()
        try:
            code = main(args)
        except SystemExit as exit_:
            code = exit_.code
        captured = capsys.readouterr()
        return Result(args, code, captured.out, captured.err)

    return run


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_bad_input_gives_one_error_line(run_main, tmp_path, name):
    disconnected = tmp_path / "disconnected.txt"
    disconnected.write_text(DISCONNECTED_EDGES)
    result = run_main(train_args(name, tmp_path, disconnected))
    assert_one_line_error(result, ERROR_CASES[name][1])
    assert result.returncode == 2  # the documented status for bad input
    assert result.stdout == ""
    assert not (tmp_path / name).exists()  # nothing written for a run that did not happen


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "--n", "4", "--gdp-mu", "0.5"],
        ["noise", "--method", "ldp", "--n", "4", "--neighbouring", "add-remove"],
        ["noise", "--method", "ldp", "--graph-seed", "1"],
        ["factorize", "--graph", "er", "--n", "4", "--graph-seed", "1"],
    ],
    ids=["audit-gdp-mu", "noise-neighbouring", "noise-graph-seed", "factorize-graph-seed"],
)
def test_a_training_option_another_command_would_ignore_is_refused(run_main, tmp_path, args):
    """noise, audit and factorize draw a random graph from their --seed and calibrate per-step
    designs: --graph-seed, --gdp-mu and --neighbouring are dpdl train's alone, refused here by
    name, not accepted and ignored."""
    result = run_main([*args, "--out", str(tmp_path / "out")])
    assert_one_line_error(result, f"unrecognized arguments: {args[-2]}")
    assert not (tmp_path / "out").exists()


def test_a_runs_default_folder_names_the_budget_its_noise_is_calibrated_to(
    run_main, tmp_path, monkeypatch
):
    """``results/train/<job>``: eps for a calibrated mechanism, mu for a budget in Gaussian DP,
    nothing for a run whose noise is calibrated to no budget (no noise, gradient tracking); the
    gradient-tracking run says in its output that nothing was accounted."""
    monkeypatch.chdir(tmp_path)
    common = ["train", "--task", "quadratic", "--n", "4", "--steps", "5", "--eval-every", "5"]
    cases = {
        "quadratic-ldp-er-eps3-seed0": ["--mechanism", "ldp", "--eps", "3"],
        "quadratic-none-er-seed0": ["--mechanism", "none"],
        "logreg-a9a-dp-dsgd-er-mu0.5-seed0": [
            *("--task", "logreg-a9a", "--mechanism", "dp-dsgd", "--clip-level", "example"),
            *("--cycle", "4", "--steps", "8", "--eval-every", "8", "--gdp-mu", "0.5"),
        ],
        "quadratic-lppa-ring-seed0": [
            "--graph",
            "ring",
            "--algorithm",
            "dsgt",
            "--mechanism",
            "lppa",
        ],
    }
    for name, args in cases.items():
        result = run_main([*common, *args])
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "results" / "train" / name / "final.json").is_file()
    assert "privacy: none accounted" in result.stderr


def test_no_command_is_a_usage_error(run_main):
    result = run_main([])
    assert_one_line_error(result, "command")


@pytest.mark.parametrize(
    ("args", "usage", "words"),
    [
        (["--help"], "usage: dpdl", ["train", "demo"]),
        (
            ["train", "--help"],
            "usage: dpdl train",
            ["--eps", "--delta", "--graph", "--mechanism", "--out"],
        ),
        (["demo", "--help"], "usage: dpdl demo", ["--steps", "--eps", "--out"]),
        (
            ["reproduce", "--help"],
            "usage: dpdl reproduce",
            ["--list", "--quick", "--parts", "--workers"],
        ),
        (
            ["factorize", "--help"],
            "usage: dpdl factorize",
            ["--participations", "--batches", "--restart", "--eps", "--out"],
        ),
        (
            ["run-agent", "--help"],
            "usage: dpdl run-agent",
            ["--workdir", "--timeout", "--resume", "--departed", "--mac", "--key-seed"],
        ),
        (
            ["run-local", "--help"],
            "usage: dpdl run-local",
            ["--workdir", "--checkpoint-every", "--algorithm", "--json"],
        ),
    ],
)
def test_help(run_main, args, usage, words):
    result = run_main(args)
    assert result.returncode == 0
    assert result.stdout.startswith(usage)
    assert all(word in result.stdout for word in words)
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("args", "keyword"),
    [
        (["--restart", "7"], "restart"),
        (["--eps", "0"], "epsilon"),
        (["--graph", "edgelist:/nonexistent"], "not found"),
    ],
)
def test_bad_factorize_requests_give_one_error_line(run_main, tmp_path, args, keyword):
    result = run_main(
        [
            "factorize",
            "--graph",
            "florentine",
            "--participations",
            "2",
            "--batches",
            "5",
            *args,
            "--out",
            str(tmp_path / "f"),
        ]
    )
    assert_one_line_error(result, keyword)


def test_factorize_reports_the_encoders_and_saves_mafaldas(run_main, tmp_path):
    """k = 4 passes: independent noise has sensitivity sqrt(4) = 2, MAFALDA's encoder 1 and a lower
    loss; the saved encoder is the lower-triangular one that was reported."""
    result = run_main(
        [
            "factorize",
            "--graph",
            "florentine",
            "--participations",
            "4",
            "--batches",
            "5",
            "--out",
            str(tmp_path),
            "--json",
        ]
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    rows = {row["method"]: row for row in summary["rows"]}
    assert rows["dp-dsgd"]["sensitivity"] == pytest.approx(2.0) and rows["mafalda"][
        "sensitivity"
    ] == pytest.approx(1.0)
    assert rows["mafalda"]["loss_ratio_to_dp_dsgd"] < 1.0 < rows["antipgd"]["loss_ratio_to_dp_dsgd"]
    assert rows["mafalda"]["sigma_per_unit_sensitivity"] == pytest.approx(
        rows["dp-dsgd"]["sigma_per_unit_sensitivity"] / 2
    )
    encoder = np.load(tmp_path / "encoder.npy")
    assert encoder.shape == (20, 20) and not np.triu(encoder, 1).any()
    # the Toeplitz strategies, one row each: BandMF at most BSR (its start) and DP-D-SGD
    assert list(rows) == ["dp-dsgd", "antipgd", "mafalda", "sqrt", "bsr", "bandmf", "bisr", "blt"]
    assert rows["bandmf"]["loss"] <= min(rows["bsr"]["loss"], rows["dp-dsgd"]["loss"])
    # noise state per agent and coordinate: b - 1 = 4 for the banded ones, d = 4 for blt, T dense
    memory = {method: row["memory_per_step"] for method, row in rows.items()}
    assert memory == {
        "dp-dsgd": 0, "antipgd": 1, "mafalda": 20, "sqrt": 20, "bsr": 4, "bandmf": 4, "bisr": 4,
        "blt": 4,
    }  # fmt: skip


def test_factorize_passes_bands_and_buffer(run_main, tmp_path):
    """--bands and --buffer reach the banded strategies and the BLT: one band is the identity
    (BSR's and BandMF's loss DP-D-SGD's); a bands count beyond T is one error line."""
    args = ["factorize", "--graph", "florentine", "--participations", "4", "--batches", "5"]
    result = run_main([*args, "--bands", "1", "--buffer", "2", "--out", str(tmp_path), "--json"])
    assert result.returncode == 0, result.stderr
    rows = {row["method"]: row for row in json.loads(result.stdout.splitlines()[-1])["rows"]}
    for method in ("bsr", "bandmf", "bisr"):
        assert rows[method]["loss"] == pytest.approx(rows["dp-dsgd"]["loss"], rel=1e-12)
        assert rows[method]["memory_per_step"] == 0
    assert rows["blt"]["memory_per_step"] == 2
    assert_one_line_error(run_main([*args, "--bands", "21", "--out", str(tmp_path / "x")]), "bands")


def test_factorize_per_agent_adds_mafalda_l(run_main, tmp_path):
    """--per-agent: MAFALDA-L-SGD's encoders (one per agent of the irregular Florentine graph) have
    MAFALDA's sensitivity, so its noise multiplier, and a lower loss; with restarts every two
    passes as well."""
    for restart in ([], ["--restart", "10"]):
        out = tmp_path / f"r{len(restart)}"
        result = run_main(
            [
                "factorize",
                "--graph",
                "florentine",
                "--participations",
                "4",
                "--batches",
                "5",
                "--per-agent",
                *restart,
                "--out",
                str(out),
                "--json",
            ]
        )
        assert result.returncode == 0, result.stderr
        rows = {
            row["method"]: row for row in json.loads(result.stdout.strip().splitlines()[-1])["rows"]
        }
        assert rows["mafalda-l"]["sensitivity"] == pytest.approx(
            rows["mafalda"]["sensitivity"], rel=1e-6
        )  # 1, and sqrt(2) with two restarted blocks
        assert rows["mafalda-l"]["sigma_per_unit_sensitivity"] == pytest.approx(
            rows["mafalda"]["sigma_per_unit_sensitivity"], rel=1e-6
        )
        assert rows["mafalda-l"]["loss"] < rows["mafalda"]["loss"]
        encoders = np.load(out / "encoders_per_agent.npy")
        assert encoders.shape == (15, 20, 20) and not np.triu(encoders, 1).any()


# --------------------------------------------------------------------------- real subprocesses


SMOKE_ARGS = [
    "train", "--task", "logreg-a9a", "--graph", "ring", "--n", "6", "--mechanism", "ldp",
    "--steps", "50", "--eval-every", "25", "--json",
]  # fmt: skip


def _dpdl_command() -> list[str]:
    """The installed ``dpdl`` console script next to the interpreter, else
    ``python -m dpdl.cli``."""
    script = Path(sys.executable).with_name("dpdl")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "dpdl.cli"]


@pytest.fixture(scope="module")
def processes(tmp_path_factory) -> tuple[Path, dict[str, Result]]:
    """Run the subprocess commands in parallel; return the work folder and each finished run."""
    root = tmp_path_factory.mktemp("cli")
    disconnected = root / "disconnected.txt"
    disconnected.write_text(DISCONNECTED_EDGES)
    commands = {
        "help": [*_dpdl_command(), "--help"],
        "unknown-task": [
            sys.executable,
            "-m",
            "dpdl.cli",
            *train_args("unknown-task", root, disconnected),
        ],
        "disconnected-edgelist": _dpdl_command()
        + train_args("disconnected-edgelist", root, disconnected),
        "smoke": [sys.executable, "-m", "dpdl.cli", *SMOKE_ARGS, "--out", str(root / "run")],
    }
    env = {**os.environ, "MPLBACKEND": "Agg"}
    started = {
        name: subprocess.Popen(
            command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name, command in commands.items()
    }
    results: dict[str, Result] = {}
    try:
        for name, process in started.items():
            stdout, stderr = process.communicate(timeout=TIMEOUT)
            results[name] = Result(commands[name], process.returncode, stdout, stderr)
    finally:
        for process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return root, results


@pytest.mark.parametrize("name", ["unknown-task", "disconnected-edgelist"])
def test_subprocess_bad_input(processes, name):
    root, results = processes
    result = results[name]
    assert_one_line_error(result, ERROR_CASES[name][1])
    assert result.returncode == 2
    assert not (root / name).exists()


def test_subprocess_help(processes):
    result = processes[1]["help"]
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: dpdl")
    assert "Traceback" not in result.stderr


def test_train_smoke(processes):
    root, results = processes
    result = results["smoke"]
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"test_loss", "test_accuracy"} <= summary.keys()
    assert summary["task"] == "logreg-a9a" and summary["mechanism"] == "ldp" and summary["n"] == 6
    assert summary["steps"] == 50
    # 50 noisy steps of logistic regression on a9a: better than chance, a finite sensible loss
    assert 0.5 < summary["test_accuracy"] <= 1.0
    assert 0.0 < summary["test_loss"] < 1.0

    folder = root / "run"
    for file in ("config.json", "metrics.csv", "final.json"):
        assert (folder / file).is_file(), sorted(p.name for p in folder.iterdir())
    figures = list(folder.glob("*.png"))
    assert figures and all(figure.stat().st_size > 0 for figure in figures)
    with open(folder / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows, "metrics.csv has no rows"
    # steps are integers, and the all-zero start predicts a9a's majority label -1 (about 76% of
    # the test examples), not neither label
    assert [row["step"] for row in rows] == ["0", "25", "50"], rows
    assert 0.7 < float(rows[0]["test_accuracy"]) < 0.8
    assert summary["noise"]["sigma"] > 0
    config = json.loads((folder / "config.json").read_text())
    assert "ring" in json.dumps(config) and "logreg-a9a" in json.dumps(config)


def test_a_reader_that_stops_reading_is_not_an_internal_error() -> None:
    """``dpdl data list | head -1``: the output's reader closes the pipe before dpdl is done; dpdl
    stops quietly, with no traceback and no "internal error"."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dpdl.cli", "data", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 1
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
