"""Hostile command lines: each case is a mistake a user can make, run in-process through
:func:`dpdl.cli.main`. Every one must end with exit status 2 and one ``dpdl: error:`` line that
names the bad thing, without a traceback and without writing anything (neither the case's output
folder nor the working directory gains a file). Arguments name the bad files of
``conftest.FILES`` as ``{key}`` and the case's output folder as ``{out}``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_helpers import assert_clear_error, fill, tree

from dpdl.cli import main

pytestmark = pytest.mark.hostile

#: A small, fast training job; each train case adds its mistake (a later option wins).
TRAIN = ["train", "--graph", "ring", "--n", "4", "--steps", "3", "--eval-every", "1"]
TRAIN += ["--no-progress", "--out", "{out}/run"]
RUN_LOCAL = ["run-local", "--graph", "ring", "--n", "3", "--steps", "2", "--task", "quadratic"]
RUN_LOCAL += ["--no-progress", "--workdir", "{out}/work", "--timeout", "20"]
NOISE = ["noise", "--graph", "ring", "--n", "4", "--steps", "10"]
AUDIT = ["audit", "--graph", "ring", "--n", "4", "--steps", "10", "--no-progress"]
AUDIT += ["--attack-trials", "100", "--out", "{out}/audit"]
#: Per-example clipping of a task with examples: what the time-correlated mechanisms account.
EXAMPLES = ["--task", "housing-mlp", "--clip-level", "example"]
FACTORIZE = ["factorize", "--graph", "ring", "--n", "4", "--participations", "2"]
FACTORIZE += ["--batches", "2", "--out", "{out}/factorize"]

# name -> (arguments, a word the error line must contain)
TRAIN_CASES: dict[str, tuple[list[str], str]] = {
    # the privacy budget
    "eps-zero": (["--eps", "0"], "epsilon"),
    "eps-negative": (["--eps", "-1"], "epsilon"),
    "eps-nan": (["--eps", "nan"], "epsilon"),
    "eps-inf": (["--eps", "inf"], "epsilon"),
    "eps-huge": (["--eps", "1e308"], "epsilon"),
    "eps-word": (["--eps", "ten"], "--eps"),
    "delta-zero": (["--delta", "0"], "delta"),
    "delta-one": (["--delta", "1"], "delta"),
    "delta-negative": (["--delta", "-0.1"], "delta"),
    "delta-nan": (["--delta", "nan"], "delta"),
    "delta-underflow": (["--delta", "1e-400"], "delta"),
    "clip-zero": (["--clip", "0"], "clip"),
    "clip-negative": (["--clip", "-1"], "clip"),
    "clip-nan": (["--clip", "nan"], "clip"),
    "clip-inf": (["--clip", "inf"], "clip"),
    "calibration-unknown": (["--calibration", "guess"], "--calibration"),
    # steps and training
    "steps-zero": (["--steps", "0"], "--steps"),
    "steps-negative": (["--steps", "-5"], "--steps"),
    "steps-fraction": (["--steps", "2.5"], "--steps"),
    "steps-exponent": (["--steps", "1e3"], "--steps"),
    "batch-zero": (["--batch-size", "0"], "--batch-size"),
    "batch-negative": (["--batch-size", "-1"], "--batch-size"),
    "lr-zero": (["--lr", "0"], "lr"),
    "lr-negative": (["--lr", "-0.1"], "lr"),
    "lr-nan": (["--lr", "nan"], "lr"),
    "lr-inf": (["--lr", "inf"], "lr"),
    "schedule-unknown": (["--schedule", "cosine"], "--schedule"),
    "eval-every-zero": (["--eval-every", "0"], "--eval-every"),
    "clip-level-unknown": (["--clip-level", "batch"], "--clip-level"),
    "example-level-without-examples": (
        ["--task", "quadratic", "--clip-level", "example"],
        "example",
    ),
    "task-unknown": (["--task", "imagenet"], "--task"),
    # seeds
    "seed-negative": (["--seed", "-1"], "seed"),
    "seed-twice": (["--seed", "3", "3"], "seed"),
    "seed-word": (["--seed", "one"], "--seed"),
    "key-seed-negative": (["--key-seed", "-2"], "key seed"),
    # data options, checked whatever the task uses
    "alpha-zero": (["--partition", "dirichlet", "--alpha", "0"], "alpha"),
    "alpha-negative-unused": (["--partition", "iid", "--alpha", "-1"], "alpha"),
    "alpha-nan": (["--alpha", "nan"], "alpha"),
    "alpha-inf": (["--alpha", "inf"], "alpha"),
    "labels-per-agent-zero": (["--labels-per-agent", "0"], "--labels-per-agent"),
    "labels-per-agent-too-many": (
        ["--partition", "labels-per-agent", "--labels-per-agent", "5"],
        "labels",
    ),
    "l2-negative": (["--l2", "-1"], "l2"),
    "l2-nan": (["--l2", "nan"], "l2"),
    "dim-zero": (["--dim", "0"], "--dim"),
    "partition-unknown": (["--partition", "random"], "--partition"),
    # graph and mixing
    "n-zero": (["--n", "0"], "--n"),
    "n-negative": (["--n", "-3"], "--n"),
    "n-one": (["--n", "1"], "n >= 3"),
    "p-zero": (["--graph", "er", "--p", "0"], "p"),
    "p-above-one": (["--graph", "er", "--p", "1.5"], "p"),
    "p-negative": (["--graph", "er", "--p", "-0.1"], "p"),
    "p-nan": (["--graph", "er", "--p", "nan"], "p"),
    "er-never-connected": (["--graph", "er", "--p", "0.001", "--n", "30"], "Erdos-Renyi"),
    "graph-unknown": (["--graph", "hypercube"], "hypercube"),
    "graph-empty-name": (["--graph", ""], "graph"),
    "torus-prime": (["--graph", "torus", "--n", "7"], "torus"),
    "mixing-unknown": (["--mixing", "uniform"], "--mixing"),
    "edgelist-missing": (["--graph", "edgelist:{missing}"], "not found"),
    "edgelist-binary": (["--graph", "edgelist:{binary}"], "binary"),
    "edgelist-empty": (["--graph", "edgelist:{empty}"], "empty"),
    "edgelist-blank": (["--graph", "edgelist:{blank}"], "blank"),
    "edgelist-weighted": (["--graph", "edgelist:{weighted}"], "weight"),
    "edgelist-csv": (["--graph", "edgelist:{csv}"], "csv"),
    "edgelist-words": (["--graph", "edgelist:{words}"], "words"),
    "edgelist-three-columns": (["--graph", "edgelist:{three-columns-text}"], "three-columns"),
    "edgelist-disconnected": (["--graph", "edgelist:{disconnected}"], "disconnected"),
    "edgelist-self-loop-only": (["--graph", "edgelist:{single-node-loop}"], "single-node-loop"),
    "edgelist-folder": (["--graph", "edgelist:{folder}"], "a-folder"),
    "edgelist-gz-binary": (["--graph", "edgelist:{gz-binary}"], "edges.txt.gz"),
    "edgelist-gz-bad": (["--graph", "edgelist:{gz-bad}"], "gz-bad"),
    "file-binary": (["--graph", "file:{binary}"], "binary"),
    "file-empty": (["--graph", "file:{empty}"], "empty"),
    "file-zip-truncated": (["--graph", "file:{zip-truncated}"], "zip-truncated"),
    "file-zip-foreign": (["--graph", "file:{zip-foreign}"], "foreign.zip"),
    "npz-text": (["--graph", "npz:{npz-text}"], "notnpz.npz"),
    "npz-no-key": (["--graph", "npz:{npz-nokey}"], "adjacency"),
    "npz-asymmetric": (["--graph", "npz:{npz-asym}"], "symmetric"),
    "npz-nan": (["--graph", "npz:{npz-nan}"], "finite"),
    "npz-rectangular": (["--graph", "npz:{npz-rect}"], "square"),
    "graphml-garbage": (["--graph", "graphml:{graphml-garbage}"], "GraphML"),
    "gml-garbage": (["--graph", "gml:{gml-garbage}"], "GML"),
    "graphml-binary": (["--graph", "graphml:{binary}"], "binary"),
    "decentralizepy-first-line": (["--graph", "decentralizepy:{decentralizepy-bad}"], "first"),
    "decentralizepy-out-of-range": (
        ["--graph", "decentralizepy:{decentralizepy-range}"],
        "out of range",
    ),
    # mechanisms and the options that apply to them only
    "mechanism-unknown": (["--mechanism", "laplace"], "laplace"),
    "mechanism-empty": (["--mechanism", ""], "mechanism"),
    "decor-search-template-without-parameter": (
        ["--mechanism", "decor", "--decor-search", "appendix-d-"],
        "--decor-search",
    ),
    "decor-search-other-mechanism": (
        ["--mechanism", "cdp", "--decor-search", "appendix-d"],
        "decor",
    ),
    "decor-search-unknown": (["--decor-search", "grid"], "--decor-search"),
    "groups-other-mechanism": (["--mechanism", "ldp", "--groups", "2"], "groups"),
    "groups-zero": (["--groups", "0"], "--groups"),
    "groups-more-than-agents": (["--mechanism", "whisper-multiseed", "--groups", "9"], "groups"),
    "q-other-mechanism": (["--mechanism", "ldp", "--q", "2"], "q"),
    "q-zero": (["--mechanism", "whisper-multiseed", "--q", "0"], "q"),
    "q-negative": (["--q", "-1"], "q"),
    "q-whole-graph": (["--mechanism", "whisper-multiseed", "--q", "4"], "q"),
    "threat-unknown": (["--mechanism", "decor", "--design-against", "aliens"], "aliens"),
    "threat-colluding-zero": (
        ["--mechanism", "decor", "--design-against", "colluding-0"],
        "colluding",
    ),
    "threat-colluding-word": (
        ["--mechanism", "decor", "--design-against", "colluding-x"],
        "colluding",
    ),
    "threat-other-mechanism": (
        ["--mechanism", "ldp", "--design-against", "central"],
        "design-against",
    ),
    # gradient tracking and the options that apply to it only
    "algorithm-unknown": (["--algorithm", "admm"], "--algorithm"),
    "tracking-calibrated-design": (["--algorithm", "dsgt", "--mechanism", "whisper"], "tracking"),
    "tracking-noise-zero": (
        ["--algorithm", "dsgt", "--mechanism", "lppa", "--tracking-noise", "0"],
        "scale",
    ),
    "tracking-noise-nan": (
        ["--algorithm", "dsgt", "--mechanism", "lppa", "--tracking-noise", "nan"],
        "scale",
    ),
    "tracking-noise-without-dsgt": (["--tracking-noise", "0.5"], "tracking-noise"),
    "every-round-without-dsgt": (["--every-round"], "every-round"),
    "distribution-without-dsgt": (["--distribution", "gaussian"], "distribution"),
    "distribution-unknown": (["--distribution", "cauchy"], "--distribution"),
    "local-steps-without-dsgt": (["--local-steps", "5"], "local-steps"),
    "local-steps-zero": (["--algorithm", "dsgt", "--local-steps", "0"], "--local-steps"),
    "split-of-a-task-without-files": (
        ["--task", "least-squares", "--split", "files"],
        "applies only to task logreg-a9a",
    ),
    "data-fraction-zero": (["--task", "logreg-a9a", "--data-fraction", "0"], "data_fraction"),
    "data-fraction-of-housing": (
        ["--task", "housing-mlp", "--data-fraction", "0.5"],
        "data-fraction",
    ),
    "start-of-a-task-without-it": (
        ["--task", "logreg-a9a", "--start", "ones"],
        "applies only to task quadratic",
    ),
    "start-unknown": (["--task", "least-squares", "--start", "twos"], "--start"),
    "average-last-negative": (["--average-last", "-1"], "average_last"),
    "average-last-beyond-the-run": (["--steps", "5", "--average-last", "6"], "more than the 5"),
    # noise correlated over time (MAFALDA-SGD): example-level, exactly calibrated, cyclic batches
    "mafalda-agent-level": (["--task", "housing-mlp", "--mechanism", "mafalda"], "--clip-level"),
    "antipgd-paper-calibration": (
        [*EXAMPLES, "--mechanism", "antipgd", "--calibration", "paper"],
        "--calibration",
    ),
    "mafalda-gradient-tracking": (
        [*EXAMPLES, "--mechanism", "mafalda", "--algorithm", "dsgt"],
        "gradient tracking injects",
    ),
    "mafalda-key-seed": (
        [*EXAMPLES, "--mechanism", "mafalda", "--key-seed", "1"],
        "--key-seed",
    ),
    "mafalda-task-without-examples": (
        ["--task", "quadratic", "--mechanism", "mafalda", "--clip-level", "example"],
        "no examples",
    ),
    "cycle-other-mechanism": (["--cycle", "4"], "--cycle"),
    "groups-of-mafalda": ([*EXAMPLES, "--mechanism", "mafalda", "--groups", "2"], "--groups"),
    "bands-of-mafalda": ([*EXAMPLES, "--mechanism", "mafalda", "--bands", "2"], "--bands"),
    "buffer-of-bandmf": ([*EXAMPLES, "--mechanism", "bandmf", "--buffer", "2"], "--buffer"),
    "bands-zero": ([*EXAMPLES, "--mechanism", "bsr", "--bands", "0"], "--bands"),
    "bands-beyond-the-run": (
        [*EXAMPLES, "--mechanism", "bisr", "--steps", "10", "--bands", "11"],
        "more than the 10 steps",
    ),
    "examples-per-agent-of-a9a": (
        ["--task", "logreg-a9a", "--examples-per-agent", "8"],
        "mnist-cnn",
    ),
    "test-examples-zero": (["--task", "mnist-cnn", "--test-examples", "0"], "test"),
    "cycle-of-no-noise-agent-level": (
        ["--task", "housing-mlp", "--mechanism", "none", "--cycle", "4"],
        "--clip-level",
    ),
    "cycle-zero": (["--mechanism", "dp-dsgd", "--cycle", "0"], "--cycle"),
    "cycle-beyond-the-data": (
        [*EXAMPLES, "--mechanism", "dp-dsgd", "--cycle", "100000"],
        "more than the",
    ),
    "mafalda-batch-beyond-the-data": (
        [*EXAMPLES, "--mechanism", "dp-dsgd", "--batch-size", "100000"],
        "--batch-size",
    ),
    # output folders
    "out-is-a-file": (["--out", "{a-file}"], "a-file"),
    "out-under-a-file": (["--out", "{under-a-file}"], "a-file"),
    # options files
    "config-missing": (["--config", "{missing}"], "does-not-exist"),
    "config-binary": (["--config", "{binary}"], "binary"),
    "config-folder": (["--config", "{folder}"], "a-folder"),
    "set-without-equals": (["--set", "steps"], "steps"),
    "set-unknown-key": (["--set", "no-such-option=1"], "no-such-option"),
    "set-fraction-steps": (["--set", "steps=2.5"], "steps"),
    "set-word-eps": (["--set", "eps=lots"], "eps"),
    # general usage
    "option-unknown": (["--no-such-option"], "no-such-option"),
    "option-value-missing": (["--eps"], "--eps"),
}

OTHER_CASES: dict[str, tuple[list[str], str]] = {
    "no-command": ([], "command"),
    "command-unknown": (["fly"], "fly"),
    "verbose-and-quiet": (["-v", "-q", "data", "list"], "-q"),
    # run-agent outside torchrun, run-local
    "run-agent-outside-torchrun": (
        ["run-agent", "--task", "quadratic", "--graph", "ring", "--n", "3", "--workdir", "{out}/w"],
        "RANK",
    ),
    "run-local-two-seeds": ([*RUN_LOCAL, "--seed", "0", "1"], "seed"),
    "run-local-workdir-file": ([*RUN_LOCAL, "--workdir", "{a-file}"], "a-file"),
    "run-local-workdir-under-file": ([*RUN_LOCAL, "--workdir", "{under-a-file}"], "a-file"),
    "run-local-timeout-zero": ([*RUN_LOCAL, "--timeout", "0"], "timeout"),
    "run-local-timeout-negative": ([*RUN_LOCAL, "--timeout", "-1"], "timeout"),
    "run-local-timeout-nan": ([*RUN_LOCAL, "--timeout", "nan"], "timeout"),
    "run-local-checkpoint-zero": ([*RUN_LOCAL, "--checkpoint-every", "0"], "--checkpoint-every"),
    "run-local-mac-unknown": ([*RUN_LOCAL, "--mac", "md5"], "--mac"),
    "run-local-departed-out-of-range": ([*RUN_LOCAL, "--resume", "--departed", "9"], "departed"),
    "run-local-departed-negative": ([*RUN_LOCAL, "--resume", "--departed", "-1"], "departed"),
    "run-local-departed-twice": ([*RUN_LOCAL, "--resume", "--departed", "1", "1"], "departed"),
    "run-local-departed-without-resume": ([*RUN_LOCAL, "--departed", "1"], "departed"),
    "run-local-resume-nothing": ([*RUN_LOCAL, "--resume"], "resume"),
    "run-local-every-round-without-dsgt": ([*RUN_LOCAL, "--every-round"], "every-round"),
    "run-local-average-last": ([*RUN_LOCAL, "--average-last", "2"], "final models only"),
    "run-local-mafalda": (
        [*RUN_LOCAL, "--task", "housing-mlp", "--mechanism", "mafalda", "--clip-level", "example"],
        "round by round",
    ),
    "run-local-cycle": (
        [*RUN_LOCAL, *EXAMPLES, "--mechanism", "none", "--cycle", "4"],
        "simulation only",
    ),
    "run-local-eps-zero": ([*RUN_LOCAL, "--eps", "0"], "eps"),
    "run-local-binary-graph": ([*RUN_LOCAL, "--graph", "edgelist:{binary}"], "binary"),
    # noise
    "noise-method-missing": (NOISE, "--method"),
    "noise-method-unknown": ([*NOISE, "--method", "laplace"], "laplace"),
    "noise-threat-unknown": ([*NOISE, "--method", "ldp", "--threat", "aliens"], "aliens"),
    "noise-eps-zero": ([*NOISE, "--method", "ldp", "--eps", "0"], "epsilon"),
    "noise-eps-huge": ([*NOISE, "--method", "ldp", "--eps", "1e308"], "epsilon"),
    "noise-delta-one": ([*NOISE, "--method", "ldp", "--delta", "1"], "delta"),
    "noise-clip-nan": ([*NOISE, "--method", "ldp", "--clip", "nan"], "clip"),
    "noise-steps-zero": ([*NOISE, "--method", "ldp", "--steps", "0"], "--steps"),
    "noise-graph-binary": ([*NOISE, "--method", "ldp", "--graph", "file:{binary}"], "binary"),
    "noise-decor-search-unknown": (
        [*NOISE, "--method", "decor", "--decor-search", "bisection"],
        "--decor-search",
    ),
    "noise-groups-other-mechanism": ([*NOISE, "--method", "ldp", "--groups", "2"], "groups"),
    "noise-groups-more-than-agents": (
        [*NOISE, "--method", "whisper-multiseed", "--groups", "9"],
        "groups",
    ),
    "noise-threat-whole-graph": (
        [*NOISE, "--method", "decor", "--threat", "colluding-4"],
        "colluding-4",
    ),
    "noise-seed-word": ([*NOISE, "--method", "ldp", "--seed", "x"], "--seed"),
    "noise-plot-format-unknown": ([*NOISE, "--method", "ldp", "--plot", "{out}/r.jpg"], "--plot"),
    "noise-plot-no-suffix": ([*NOISE, "--method", "ldp", "--plot", "{out}/figure"], "--plot"),
    "noise-plot-under-file": ([*NOISE, "--method", "ldp", "--plot", "{a-file}/r.png"], "a-file"),
    "noise-plot-too-many-agents": (
        [*NOISE, "--method", "ldp", "--n", "1000", "--plot", "{out}/r.png"],
        "--plot",
    ),
    # audit
    "audit-mechanism-unknown": ([*AUDIT, "--mechanisms", "laplace"], "laplace"),
    "audit-delta-zero": ([*AUDIT, "--delta", "0"], "delta"),
    "audit-trials-too-few": ([*AUDIT, "--attack-trials", "10"], "trials"),
    "audit-trials-zero": ([*AUDIT, "--attack-trials", "0"], "--attack-trials"),
    "audit-eps-nan": ([*AUDIT, "--eps", "nan"], "eps"),
    "audit-out-file": ([*AUDIT, "--out", "{a-file}"], "a-file"),
    "audit-out-under-file": ([*AUDIT, "--out", "{under-a-file}"], "a-file"),
    "audit-plot-format-unknown": ([*AUDIT, "--plot", "{out}/bounds.txt"], "--plot"),
    "audit-plot-under-file": ([*AUDIT, "--plot", "{under-a-file}/bounds.png"], "a-file"),
    # factorize
    "factorize-participations-zero": ([*FACTORIZE, "--participations", "0"], "--participations"),
    "factorize-batches-zero": ([*FACTORIZE, "--batches", "0"], "--batches"),
    "factorize-restart-not-multiple": ([*FACTORIZE, "--restart", "3"], "restart"),
    "factorize-eps-zero": ([*FACTORIZE, "--eps", "0"], "epsilon"),
    "factorize-eps-nan": ([*FACTORIZE, "--eps", "nan"], "epsilon"),
    "factorize-delta-two": ([*FACTORIZE, "--delta", "2"], "delta"),
    "factorize-out-file": ([*FACTORIZE, "--out", "{a-file}"], "a-file"),
    "factorize-per-agent-too-big": (
        [*FACTORIZE, "--n", "3000", "--participations", "100", "--batches", "19", "--per-agent"],
        "cannot fit in memory: it needs about 243.6 GiB (largest term: every agent's encoder",
    ),
    # reproduce
    "reproduce-unknown": (["reproduce", "no-such-figure", "--out", "{out}/r"], "no-such-figure"),
    "reproduce-workers-zero": (["reproduce", "--list", "--workers", "0"], "--workers"),
    "reproduce-parts-unknown": (
        ["reproduce", "decor-fig1", "--parts", "nothing", "--out", "{out}/r"],
        "nothing",
    ),
    "reproduce-out-file": (["reproduce", "decor-fig1", "--quick", "--out", "{a-file}"], "a-file"),
    # demo
    "demo-steps-zero": (["demo", "--steps", "0", "--out", "{out}/d"], "--steps"),
    "demo-eps-zero": (["demo", "--eps", "0", "--out", "{out}/d"], "epsilon"),
    "demo-eps-nan": (["demo", "--eps", "nan", "--out", "{out}/d"], "epsilon"),
    "demo-seed-twice": (["demo", "--seed", "1", "1", "--out", "{out}/d"], "seed"),
    "demo-seed-negative": (["demo", "--seed", "-1", "--out", "{out}/d"], "seed"),
    "demo-out-file": (["demo", "--steps", "2", "--out", "{a-file}"], "a-file"),
    # data
    "data-fetch-unknown": (["data", "fetch", "imagenet", "--dest", "{out}/d"], "imagenet"),
    "data-fetch-no-name": (["data", "fetch"], "name"),
    "data-fetch-dest-file": (["data", "fetch", "mnist", "--dest", "{a-file}"], "a-file"),
    "data-subcommand-unknown": (["data", "burn"], "burn"),
}


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    """Exit status and stderr of ``dpdl ARGS`` run in-process; an exception escaping ``main``
    (a traceback in a real process) fails the case."""
    try:
        code = main(args)
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def _check(
    args: list[str],
    keyword: str,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    filled = fill(args, files, out)
    before = {key: path.read_bytes() for key, path in files.items() if path.is_file()}
    code, stderr = _run(filled, capsys)
    assert_clear_error(code, stderr, fill([keyword], files, out)[0], filled)
    assert tree(out) == [], f"{filled} wrote {tree(out)}"
    assert tree(cwd) == [], f"{filled} wrote {tree(cwd)} in the working directory"
    assert {key: path.read_bytes() for key, path in files.items() if path.is_file()} == before


@pytest.mark.parametrize("name", TRAIN_CASES)
def test_train_mistake_is_one_clear_error(
    name: str,
    bad_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    extra, keyword = TRAIN_CASES[name]
    _check([*TRAIN, *extra], keyword, bad_files, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize("name", OTHER_CASES)
def test_command_mistake_is_one_clear_error(
    name: str,
    bad_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for variable in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.delenv(variable, raising=False)
    args, keyword = OTHER_CASES[name]
    _check(args, keyword, bad_files, tmp_path, monkeypatch, capsys)


def test_data_dir_pointing_at_nothing(
    bad_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A data set read while ``DPDL_DATA_DIR`` names no folder is an error naming the variable,
    not a silent fall-back to the cache."""
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path / "nowhere"))
    args = [*TRAIN, "--task", "housing-mlp"]
    _check(args, "DPDL_DATA_DIR", bad_files, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize("cut", [0, 10, 100])
def test_truncated_data_file(
    cut: int,
    bad_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A data file cut short (as an interrupted copy leaves it) is an error naming the file."""
    slices = Path(__file__).resolve().parents[1] / "data"
    data = tmp_path / "data"
    (data / "california_housing").mkdir(parents=True)
    whole = (slices / "california_housing" / "cal_housing.data.gz").read_bytes()
    (data / "california_housing" / "cal_housing.data.gz").write_bytes(whole[:cut])
    monkeypatch.setenv("DPDL_DATA_DIR", str(data))
    args = [*TRAIN, "--task", "housing-mlp"]
    _check(args, "cal_housing.data.gz", bad_files, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize("cut", [0, 16, 1000])
def test_truncated_image_file(
    cut: int,
    bad_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A truncated MNIST file (gzip cut short, or an IDX file shorter than its header says)."""
    slices = Path(__file__).resolve().parents[1] / "data" / "mnist"
    data = tmp_path / "data" / "mnist"
    data.mkdir(parents=True)
    for path in slices.iterdir():
        (data / path.name).write_bytes(path.read_bytes())
    images = data / "train-images-idx3-ubyte.gz"
    images.write_bytes(images.read_bytes()[:cut])
    monkeypatch.setenv("DPDL_DATA_DIR", str(data.parent))
    args = [*TRAIN, "--task", "mnist-mlp"]
    _check(args, "train-images-idx3-ubyte.gz", bad_files, tmp_path, monkeypatch, capsys)


def test_a_bug_shows_its_traceback_and_asks_for_a_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An exception that is not a DpdlError is dpdl's fault, not the user's: its traceback is
    printed, with a request to report it, and the exit status is 1 (not 2, a usage error)."""

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("an internal inconsistency")

    monkeypatch.setattr("dpdl.experiments.noise.noise_report", broken)
    code = main(["noise", "--method", "ldp", "--graph", "ring", "--n", "4", "--steps", "10"])
    stderr = capsys.readouterr().err
    assert code == 1
    assert "Traceback" in stderr and "RuntimeError: an internal inconsistency" in stderr
    assert "dpdl: internal error" in stderr and "report" in stderr
    assert "dpdl: error:" not in stderr
