"""Hostile options files: ``dpdl train --config FILE [--set KEY=VALUE]`` with files a user could
write or damage. Each must end with exit status 2 and one ``dpdl: error:`` line naming the bad
key, value or file, without a traceback and without writing anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hostile_helpers import assert_clear_error, tree

from dpdl.cli import main

pytestmark = pytest.mark.hostile

#: A small valid job; a case's own keys replace these lines.
BASE = {
    "graph": '"ring"',
    "n": "4",
    "steps": "3",
    "eval-every": "1",
    "no-progress": "true",
}

# name -> (TOML text, a word the error line must contain)
FILE_CASES: dict[str, tuple[str, str]] = {
    "not-toml": ("steps = = 3\n", "TOML"),
    "unclosed-string": ('graph = "ring\n', "TOML"),
    "unclosed-table": ("[graph\n", "TOML"),
    "unknown-key": ("no-such-option = 3\n", "no-such-option"),
    "typo-key": ("stepz = 3\n", "steps"),
    "table": ("[training]\nlr = 0.1\n", "training"),
    "key-twice-spellings": ("batch-size = 8\nbatch_size = 8\n", "twice"),
    "key-twice": ("steps = 3\nsteps = 4\n", "TOML"),
    "steps-string": ('steps = "many"\n', "steps"),
    "steps-fraction": ("steps = 2.5\n", "steps"),
    "steps-bool": ("steps = true\n", "steps"),
    "steps-zero": ("steps = 0\n", "steps"),
    "steps-negative": ("steps = -4\n", "steps"),
    "eps-list": ("eps = [1, 2]\n", "eps"),
    "eps-nan": ("eps = nan\n", "eps"),
    "eps-inf": ("eps = inf\n", "eps"),
    "eps-zero": ("eps = 0\n", "eps"),
    "delta-string": ('delta = "small"\n', "delta"),
    "delta-one": ("delta = 1.0\n", "delta"),
    "clip-negative": ("clip = -0.5\n", "clip"),
    "lr-zero": ("lr = 0.0\n", "lr"),
    "alpha-negative": ("alpha = -1.0\n", "alpha"),
    "l2-nan": ("l2 = nan\n", "l2"),
    "p-above-one": ('graph = "er"\np = 2.0\n', "p"),
    "seed-twice": ("seed = [3, 3]\n", "seed"),
    "seed-empty": ("seed = []\n", "seed"),
    "seed-string": ('seed = ["a"]\n', "seed"),
    "seed-negative": ("seed = [-1]\n", "seed"),
    "mechanism-number": ("mechanism = 3\n", "mechanism"),
    "mechanism-unknown": ('mechanism = "laplace"\n', "laplace"),
    "task-unknown": ('task = "imagenet"\n', "imagenet"),
    "mixing-unknown": ('mixing = "uniform"\n', "mixing"),
    "graph-binary-file": ('graph = "edgelist:{binary}"\n', "binary"),
    "every-round-without-dsgt": ("every-round = true\n", "every-round"),
    "every-round-string": ('every-round = "yes"\n', "every-round"),
    "tracking-noise-without-dsgt": ("tracking-noise = 0.5\n", "tracking-noise"),
    "decor-couple-removed": ('mechanism = "decor"\ndecor-couple = 1\n', "decor-couple"),
    "groups-other-mechanism": ('mechanism = "cdp"\ngroups = 2\n', "groups"),
    "calibration-unknown": ('calibration = "guess"\n', "calibration"),
    "out-not-an-option": ('out = "{a-file}"\n', "unknown option 'out'"),
    "date-value": ("steps = 1979-05-27\n", "steps"),
}

# name -> (--set assignments, a word the error line must contain)
SET_CASES: dict[str, tuple[list[str], str]] = {
    "no-equals": (["steps"], "steps"),
    "empty-key": (["=3"], "key=value"),
    "unknown-key": (["stepz=3"], "stepz"),
    "steps-fraction": (["steps=2.5"], "steps"),
    "steps-word": (["steps=many"], "steps"),
    "eps-word": (["eps=lots"], "eps"),
    "eps-nan": (["eps=nan"], "eps"),
    "seed-twice": (["seed=[1, 1]"], "seed"),
    "seed-table": (["seed={a = 1}"], "seed"),
    "every-round-number": (["every-round=1"], "every-round"),
    "alpha-negative": (["alpha=-2.0"], "alpha"),
}

# name -> (file content as bytes, a word the error line must contain)
RAW_CASES: dict[str, tuple[bytes, str]] = {
    "binary": (bytes(range(256)), "config.toml"),
    "utf16": ("steps = 3\n".encode("utf-16"), "config.toml"),
    "empty-then-bad-set": (b"", "stepz"),
    "nul-bytes": (b"steps = 3\x00\n", "config.toml"),
}


def _toml(case: str) -> str:
    """``case`` with the lines of :data:`BASE` whose key it does not set."""
    keys = set(re.findall(r"^\s*\[?\s*([\w-]+)", case, flags=re.MULTILINE))
    base = [f"{key} = {value}" for key, value in BASE.items() if key not in keys]
    return case + "\n".join(base) + "\n"


def _run_config(
    config: Path,
    sets: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    keyword: str,
) -> None:
    out = tmp_path / "out"
    args = ["train", "--config", str(config), *(f"--set={a}" for a in sets)]
    if "out =" not in config.read_text(errors="replace"):
        args += ["--out", str(out)]
    try:
        code = main(args)
    except SystemExit as stop:
        code = stop.code
    assert_clear_error(code, capsys.readouterr().err, keyword, args)
    assert tree(out) == []


@pytest.mark.parametrize("name", FILE_CASES)
def test_bad_options_file(
    name: str,
    bad_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    text, keyword = FILE_CASES[name]
    config = tmp_path / "config.toml"
    config.write_text(
        _toml(text.replace("{binary}", str(bad_files["binary"]))).replace(
            "{a-file}", str(bad_files["a-file"])
        )
    )
    _run_config(config, [], tmp_path, capsys, keyword)


@pytest.mark.parametrize("name", SET_CASES)
def test_bad_set(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    sets, keyword = SET_CASES[name]
    config = tmp_path / "config.toml"
    config.write_text(_toml(""))
    _run_config(config, sets, tmp_path, capsys, keyword)


@pytest.mark.parametrize("name", RAW_CASES)
def test_damaged_options_file(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    content, keyword = RAW_CASES[name]
    config = tmp_path / "config.toml"
    config.write_bytes(content)
    _run_config(
        config, ["stepz=1"] if name == "empty-then-bad-set" else [], tmp_path, capsys, keyword
    )


def test_a_written_options_file_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The config.toml a run wrote, cut in the middle of a line (a torn copy), is refused with the
    file named: never a run with the options that happened to survive."""
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "first"
    assert (
        main(
            [
                "train",
                "--graph",
                "ring",
                "--n",
                "4",
                "--steps",
                "2",
                "--no-progress",
                "--out",
                str(first),
            ]
        )
        == 0
    )
    capsys.readouterr()
    text = (first / "config.toml").read_text()
    cut = tmp_path / "config.toml"
    cut.write_text(text[: text.index("seed = [") + len("seed = [")])
    _run_config(cut, [], tmp_path, capsys, "config.toml")
