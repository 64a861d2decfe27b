"""The library logs and never prints; the command line shows the records at the level of -v / -q,
and the processes it starts inherit that level (:mod:`dpdl.logs`)."""

from __future__ import annotations

import ast
import logging
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import dpdl
from dpdl import logs
from dpdl.cli import main
from dpdl.data import housing
from dpdl.processes import worker_context

SRC = Path(dpdl.__file__).resolve().parent


def test_no_module_but_the_cli_prints() -> None:
    """``print`` (and writes to sys.stdout / sys.stderr) belong to the command line alone."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if SRC / "cli" in path.parents:  # the command line package
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            call = node.func if isinstance(node, ast.Call) else None
            if isinstance(call, ast.Name) and call.id == "print":
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} print")
            if (
                isinstance(call, ast.Attribute)
                and call.attr == "write"
                and isinstance(call.value, ast.Attribute)
                and call.value.attr in ("stdout", "stderr")
            ):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} {call.value.attr}.write")
    assert offenders == []


def test_a_slice_is_logged_as_a_record_not_printed(caplog, capsys) -> None:
    housing._load.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="dpdl"):
            housing.load_california_housing()
    finally:
        housing._load.cache_clear()
    assert [record.name for record in caplog.records] == ["dpdl.data.housing"]
    assert "a slice" in caplog.records[0].getMessage()
    assert capsys.readouterr() == ("", "")


@pytest.fixture
def noisy_data_list(monkeypatch, capsys):
    """``dpdl [options] data list`` with a library that logs one record per level."""
    import dpdl.data.fetch

    def survey(datasets=None):  # noqa: ANN001, ANN202
        log = logging.getLogger("dpdl.data.fetch")
        log.debug("a debug record")
        log.info("an info record")
        log.warning("a warning record")
        log.error("an error record")
        return []

    monkeypatch.setattr(dpdl.data.fetch, "survey", survey)
    monkeypatch.setattr(dpdl.data.paths, "manifest", dict)
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)

    def run(*options: str) -> list[str]:
        capsys.readouterr()
        assert main([*options, "data", "list"]) == 0
        return [line for line in capsys.readouterr().err.splitlines() if line]

    return run


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ((), ["warning", "error"]),
        (("-v",), ["info", "warning", "error"]),
        (("--verbose", "--verbose"), ["debug", "info", "warning", "error"]),
        (("-vvv",), ["debug", "info", "warning", "error"]),
        (("-q",), ["error"]),
    ],
)
def test_verbose_and_quiet_set_what_the_cli_shows(noisy_data_list, options, shown) -> None:
    article = {"debug": "a", "info": "an", "warning": "a", "error": "an"}
    assert noisy_data_list(*options) == [
        f"dpdl: {level}: {article[level]} {level} record" for level in shown
    ]


def test_a_level_passed_on_by_a_parent_applies_without_options(
    noisy_data_list, monkeypatch
) -> None:
    """Agents started by torchrun run ``dpdl run-agent`` with the launching shell's environment."""
    monkeypatch.setenv(logs.LEVEL_ENV, "INFO")
    assert noisy_data_list()[0] == "dpdl: info: an info record"
    monkeypatch.setenv(logs.LEVEL_ENV, "INFO")
    assert noisy_data_list("-q") == ["dpdl: error: an error record"]


def test_quiet_hides_warnings_too(noisy_data_list, monkeypatch) -> None:
    import dpdl.data.fetch

    def survey(datasets=None):  # noqa: ANN001, ANN202
        warnings.warn("a user warning", UserWarning, stacklevel=1)
        return []

    monkeypatch.setattr(dpdl.data.fetch, "survey", survey)
    for options, count in (((), 1), (("-q",), 0)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            noisy_data_list(*options)
        assert [str(w.message) for w in seen] == ["a user warning"] * count


def test_verbose_and_quiet_exclude_each_other(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["-v", "-q", "data", "list"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "dpdl: error: argument -q/--quiet: not allowed with argument -v/--verbose"
    )


def test_child_processes_log_at_the_level_of_their_parent() -> None:
    """A fork-server child has neither its parent's handlers nor its current environment: it takes
    the level along when it is created."""
    logger = logging.getLogger("dpdl")
    context = worker_context()
    for level in (logging.DEBUG, logging.ERROR):
        logs.configure(level)
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            assert pool.submit(logger.getEffectiveLevel).result() == level
        process = context.Process(target=logger.getEffectiveLevel)
        process.start()
        process.join()
        assert process.exitcode == 0


def test_configure_twice_keeps_one_handler() -> None:
    logs.configure(logging.INFO)
    logs.configure(logging.DEBUG)
    handlers = [h for h in logging.getLogger("dpdl").handlers if isinstance(h, logs._Stderr)]
    assert len(handlers) == 1
    assert logging.getLogger("dpdl").level == logging.DEBUG
