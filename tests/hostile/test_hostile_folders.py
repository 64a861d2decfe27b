"""Hostile results folders (issue 49, item 3): every command that writes a folder, into a folder it
must not write (another program's files, another run's results, a folder another job holds, a file
where the folder goes, the working or home folder to `--overwrite`), is refused with exit status 2
and one ``dpdl: error:`` line naming the folder, and the folder is left exactly as it was."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hostile_helpers import assert_clear_error

from dpdl.cli import main
from dpdl.files import LOCK_NAME, RUN_MARKER

pytestmark = pytest.mark.hostile

SWEEP_FILE = '[base]\ntask = "quadratic"\ngraph = "ring"\nn = 3\nsteps = 2\n[sweep]\nseed = [0]\n'

#: Each command's arguments for a tiny run, `{out}` its results folder, and the option naming it.
COMMANDS: dict[str, tuple[list[str], str]] = {
    "train": (
        [
            "train",
            "--task",
            "quadratic",
            "--graph",
            "ring",
            "--n",
            "3",
            "--steps",
            "2",
            "--no-progress",
            "--out",
            "{out}",
        ],
        "--out",
    ),
    "run-local": (
        [
            "run-local",
            "--task",
            "quadratic",
            "--graph",
            "ring",
            "--n",
            "3",
            "--steps",
            "2",
            "--no-progress",
            "--timeout",
            "20",
            "--workdir",
            "{out}",
        ],
        "--workdir",
    ),
    "audit": (
        [
            "audit",
            "--graph",
            "ring",
            "--n",
            "4",
            "--steps",
            "2",
            "--mechanisms",
            "ldp",
            "--attack-trials",
            "10",
            "--no-progress",
            "--out",
            "{out}",
        ],
        "--out",
    ),
    "factorize": (
        [
            "factorize",
            "--graph",
            "ring",
            "--n",
            "4",
            "--participations",
            "2",
            "--batches",
            "2",
            "--out",
            "{out}",
        ],
        "--out",
    ),
    "demo": (["demo", "--steps", "2", "--no-progress", "--out", "{out}"], "--out"),
    "sweep": (["sweep", "{sweep}", "--no-progress", "--jobs", "1", "--out", "{out}"], "--out"),
    "reproduce": (
        ["reproduce", "whisper-variance", "--quick", "--no-progress", "--out", "{out}"],
        "--out",
    ),
}


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with a file's bytes (None: a folder or a link)."""
    if not folder.exists():
        return {}
    return {
        str(path.relative_to(folder)): (
            path.read_bytes() if path.is_file() and not path.is_symlink() else None
        )
        for path in sorted(folder.rglob("*"))
    }


def _marker(folder: Path, command: str, settings: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"format": "dpdl-run", "command": command, "settings": settings}
    (folder / RUN_MARKER).write_text(json.dumps(record))


def _foreign(folder: Path, command: str) -> None:
    folder.mkdir()
    (folder / "notes.txt").write_text("my thesis, not a dpdl run\n")
    (folder / "src").mkdir()
    (folder / "src" / "main.c").write_text("int main(void) { return 0; }\n")


def _other_command(folder: Path, command: str) -> None:
    other = "audit" if command != "audit" else "train"
    _marker(folder, other, {"graph": "complete"})
    (folder / "final.json").write_text('{"loss": 1.0}\n')


def _other_settings(folder: Path, command: str) -> None:
    _marker(folder, command, {"seed": [7], "earlier": "run"})
    (folder / "final.json").write_text('{"loss": 1.0}\n')
    (folder / "models").mkdir()
    (folder / "models" / "seed7.safetensors").write_bytes(b"weights of an earlier seed")


def _bad_marker(folder: Path, command: str) -> None:
    folder.mkdir()
    (folder / RUN_MARKER).write_text("{not json")
    (folder / "data.csv").write_text("a,b\n1,2\n")


def _marker_of_another_format(folder: Path, command: str) -> None:
    folder.mkdir()
    (folder / RUN_MARKER).write_text(json.dumps({"format": "other-tool", "command": command}))
    (folder / "data.csv").write_text("a,b\n1,2\n")


def _file(folder: Path, command: str) -> None:
    folder.write_text("a file where the folder goes\n")


#: Folder states a command must refuse, with what its error names.
STATES: dict[str, tuple[Callable[[Path, str], None], list[str], str]] = {
    "foreign": (_foreign, [], "holds no dpdl run"),
    "foreign-overwrite": (_foreign, ["--overwrite"], "clears only a folder that dpdl wrote"),
    "another-command": (_other_command, [], "another run's results"),
    "other-settings": (_other_settings, [], "other settings"),
    "bad-marker-overwrite": (_bad_marker, ["--overwrite"], "clears only a folder that dpdl wrote"),
    "foreign-marker-format": (_marker_of_another_format, [], "holds no dpdl run"),
    "a-file": (_file, [], "is a file, not a folder"),
}


def _run(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[object, str]:  # exit status, stderr
    try:
        code = main(args)
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def _args(command: str, out: Path, tmp_path: Path, extra: list[str]) -> list[str]:
    sweep = tmp_path / "tiny.toml"
    sweep.write_text(SWEEP_FILE)
    args, _ = COMMANDS[command]
    return [arg.format(out=out, sweep=sweep) for arg in args] + extra


@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_refuses_a_folder_it_must_not_write(
    command: str,
    state: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    make, extra, keyword = STATES[state]
    out = tmp_path / "results"
    make(out, command)
    before = _snapshot(out) if out.is_dir() else out.read_bytes()
    args = _args(command, out, tmp_path, extra)
    code, stderr = _run(args, capsys)
    assert_clear_error(code, stderr, keyword, args)
    assert str(out) in stderr, stderr
    assert (_snapshot(out) if out.is_dir() else out.read_bytes()) == before, "the folder changed"


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Path]:
    """An empty folder whose lock another process holds (its id written in the lock file, as
    `folder_lock` writes it; held here through an open file description of its own)."""
    folder = tmp_path / "held"
    folder.mkdir()
    handle = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(handle, b"424242\n")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        yield folder
    finally:
        os.close(handle)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_folder_another_job_holds_is_refused_naming_the_holder(
    command: str,
    held: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    args = _args(command, held, tmp_path, [])
    code, stderr = _run(args, capsys)
    assert_clear_error(code, stderr, "in use by another dpdl", args)
    assert "process 424242" in stderr and str(held) in stderr, stderr
    assert sorted(p.name for p in held.iterdir()) == [LOCK_NAME]


def test_a_data_fetch_into_a_folder_another_job_holds_is_refused(
    held: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["data", "fetch", "adult", "--dest", str(held), "--no-progress"]
    code, stderr = _run(args, capsys)
    assert_clear_error(code, stderr, "process 424242", args)
    assert sorted(p.name for p in held.iterdir()) == [LOCK_NAME]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_overwrite_never_clears_the_working_folder(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    here = tmp_path / "work"
    _marker(here, command, {"seed": [7]})  # even one that looks like a dpdl run's
    (here / "precious.txt").write_text("keep me\n")
    monkeypatch.chdir(here)
    before = _snapshot(here)
    args = _args(command, Path("."), tmp_path, ["--overwrite"])
    code, stderr = _run(args, capsys)
    assert_clear_error(code, stderr, "working folder", args)
    assert _snapshot(here) == before


@pytest.mark.parametrize("command", ["train", "audit", "sweep"])
def test_overwrite_never_clears_the_home_folder(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    _marker(home, command, {"seed": [7]})
    (home / ".bashrc").write_text("export PATH\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    before = _snapshot(home)
    args = _args(command, home, tmp_path, ["--overwrite"])
    code, stderr = _run(args, capsys)
    assert_clear_error(code, stderr, "home", args)
    assert _snapshot(home) == before


@pytest.mark.parametrize("command", ["train", "audit", "factorize"])
def test_a_link_to_a_foreign_folder_is_refused(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere"
    _foreign(target, command)
    link = tmp_path / "link"
    link.symlink_to(target)
    before = _snapshot(target)
    args = _args(command, link, tmp_path, ["--overwrite"])
    code, stderr = _run(args, capsys)
    assert_clear_error(code, stderr, "clears only a folder that dpdl wrote", args)
    assert _snapshot(target) == before


@pytest.mark.parametrize("command", ["train", "run-local"])
def test_resume_and_overwrite_together_are_refused(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results"
    _other_settings(out, command)
    before = _snapshot(out)
    args = _args(command, out, tmp_path, ["--resume", "--overwrite"])
    code, stderr = _run(args, capsys)
    assert_clear_error(code, stderr, "--resume", args)
    assert _snapshot(out) == before


@pytest.mark.parametrize("command", ["train", "run-local"])
def test_a_resume_with_other_options_is_refused_once_naming_them(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results"
    _other_settings(out, command)
    before = _snapshot(out)
    args = _args(command, out, tmp_path, ["--resume"])
    code, stderr = _run(args, capsys)
    assert_clear_error(code, stderr, "seed was [7]", args)
    assert _snapshot(out) == before
