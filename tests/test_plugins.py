"""Open registries (:mod:`dpdl.registry`) and plugins: names registered by import path are imported
only when used; user code registers with a decorator; ``DPDL_PLUGINS`` and the ``dpdl.plugins``
entry points bring a plugin's names to the command line; ``examples/custom_mechanism.py`` runs from
the Python API and as a plugin of ``dpdl train``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpdl import choices, registry
from dpdl.choices import (
    GRAPH_SOURCES,
    MECHANISM_REGISTRY,
    MIXING_RULE_REGISTRY,
    TASK_REGISTRY,
    THREAT_REGISTRY,
)
from dpdl.errors import ConfigError, GraphError, MixingMatrixError
from dpdl.jobspec.config import TrainConfig
from dpdl.registry import Registry, load_plugins

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_mechanism.py"


def _registry() -> Registry:
    reg = Registry("widget")
    reg.add("lazy", "dpdl_no_such_module_xyz:thing", "imported on first use")
    reg.add("size-<k>", "dpdl_no_such_module_xyz:sized", "a template")
    return reg


def test_the_decorator_registers_and_returns_the_object() -> None:
    reg = _registry()

    @reg.register("mine", help="my widget")
    def mine() -> str:
        return "built"

    assert reg.get("mine") is mine
    assert mine() == "built"
    assert reg.names() == ("lazy", "size-<k>", "mine")
    assert reg.helps()["mine"] == "my widget"
    assert "mine" in reg
    assert list(reg) == ["lazy", "size-<k>", "mine"]
    assert len(reg) == 3


def test_a_duplicate_name_is_an_error_unless_replaced() -> None:
    reg = _registry()
    with pytest.raises(ConfigError, match=r"widget 'lazy' is registered already"):
        reg.add("lazy", object())
    replacement = object()
    reg.register("lazy", help="new", replace=True)(replacement)
    assert reg.get("lazy") is replacement
    assert reg.names() == ("lazy", "size-<k>")


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown widget 'nope'; known: lazy, size-<k>"):
        _registry().get("nope")
    with pytest.raises(GraphError, match=r"unknown graph 'nope'"):
        GRAPH_SOURCES.entry("nope")
    with pytest.raises(MixingMatrixError, match=r"unknown mixing rule 'nope'"):
        MIXING_RULE_REGISTRY.entry("nope")
    assert "nope" not in _registry()
    assert 3 not in _registry()


def test_listing_imports_nothing_and_use_imports_the_target() -> None:
    reg = _registry()
    assert reg.names() == ("lazy", "size-<k>")
    assert "lazy" in reg
    assert "size-12" in reg
    assert not reg.entry("lazy").loaded
    assert "dpdl_no_such_module_xyz" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        reg.get("lazy")


def test_a_template_matches_with_its_parameter() -> None:
    reg = _registry()
    entry, parameter = reg.match("size-12")
    assert (entry.name, parameter) == ("size-<k>", "12")
    assert reg.match("lazy")[1] is None
    with pytest.raises(ConfigError, match="unknown widget 'size-'"):
        reg.match("size-")
    with pytest.raises(ConfigError, match="at most one <parameter>"):
        reg.add("a-<b>-<c>", object())


def test_the_built_in_names_are_the_registries_entries() -> None:
    from dpdl.graphs.mixing import MIXING_RULES
    from dpdl.mechanisms.registry import MECHANISMS
    from dpdl.threats import Colluding, threat_by_name

    assert MECHANISM_REGISTRY.names() == choices.MECHANISM_NAMES
    # the built-in tasks first; after them, those of the installed plugins (the reproductions')
    assert TASK_REGISTRY.names()[: len(choices.TASKS)] == choices.TASKS
    assert MIXING_RULE_REGISTRY.names() == choices.MIXING_RULE_NAMES
    assert choices.SYNTHETIC_GRAPHS + tuple(choices.REAL_GRAPHS) == GRAPH_SOURCES.names()
    assert THREAT_REGISTRY.names() == choices.THREAT_NAMES
    for name, factory in MECHANISMS.items():
        assert MECHANISM_REGISTRY.get(name) is factory
    for name, rule in MIXING_RULES.items():
        assert MIXING_RULE_REGISTRY.get(name) is rule
    assert threat_by_name("colluding-3") == Colluding(3)
    with pytest.raises(ConfigError, match="unknown threat model 'colluding-x'"):
        threat_by_name("colluding-x")
    assert all(help for help in MECHANISM_REGISTRY.helps().values())


def test_listing_the_registries_imports_no_implementation() -> None:
    script = (
        "import json, sys\n"
        "from dpdl import choices\n"
        "for reg in (choices.MECHANISM_REGISTRY, choices.TASK_REGISTRY, choices.GRAPH_SOURCES,\n"
        "            choices.MIXING_RULE_REGISTRY, choices.THREAT_REGISTRY):\n"
        "    reg.names(); reg.helps(); 'ldp' in reg\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('dpdl.mechanisms',\n"
        "    'dpdl.tasks', 'dpdl.graphs', 'dpdl.threats', 'numpy', 'networkx', 'torch')))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(result.stdout) == []


def test_a_name_registered_at_run_time_is_a_choice_of_the_settings_and_the_parser() -> None:
    from dpdl.cli import build_parser
    from dpdl.graphs import build_graph, mixing_matrix, sinkhorn_knopp

    MIXING_RULE_REGISTRY.register("test-sinkhorn", help="a test's rule")(sinkhorn_knopp)
    try:
        assert TrainConfig(mixing="test-sinkhorn").mixing == "test-sinkhorn"
        args = build_parser().parse_args(["train", "--mixing", "test-sinkhorn"])
        assert args.mixing == "test-sinkhorn"
        graph = build_graph("ring", 5)
        assert (mixing_matrix(graph, "test-sinkhorn") == mixing_matrix(graph, "sinkhorn")).all()
    finally:
        MIXING_RULE_REGISTRY.unregister("test-sinkhorn")
    with pytest.raises(ConfigError, match="mixing"):
        TrainConfig(mixing="test-sinkhorn")


def test_plugins_named_by_the_environment_are_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dpdl_test_plugin_env.py").write_text(
        "from dpdl.choices import THREAT_REGISTRY\n"
        "from dpdl.threats import Eavesdropper\n"
        "THREAT_REGISTRY.register('test-env-threat', help='from DPDL_PLUGINS')(Eavesdropper)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.PLUGINS_ENV, "dpdl_test_plugin_env")
    try:
        # the environment's plugins first, then the installed ones (the reproductions')
        assert load_plugins(force=True)[0] == "dpdl_test_plugin_env"
        assert "test-env-threat" in THREAT_REGISTRY
    finally:
        THREAT_REGISTRY.unregister("test-env-threat")
    monkeypatch.setenv(registry.PLUGINS_ENV, str(tmp_path / "missing.py"))
    with pytest.raises(ConfigError, match="no plugin file"):
        load_plugins(force=True)


def test_plugins_declared_by_entry_points_are_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "dpdl_test_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dpdl-test-dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dpdl.plugins]\ntest = dpdl_test_plugin_ep\n")
    (tmp_path / "dpdl_test_plugin_ep.py").write_text(
        "from dpdl.choices import THREAT_REGISTRY\n"
        "from dpdl.threats import CentralObserver\n"
        "THREAT_REGISTRY.register('test-ep-threat', help='from an entry point')(CentralObserver)\n"
    )
    monkeypatch.delenv(registry.PLUGINS_ENV, raising=False)
    # the scan finds the declaration in this folder, and none in a folder without one
    for folder, declared in ((tmp_path / "dpdl_test_dist-1.0.dist-info", False), (tmp_path, True)):
        with monkeypatch.context() as scan:
            scan.setattr(sys, "path", [str(folder)])
            assert registry._declares_plugins() is declared
    monkeypatch.syspath_prepend(str(tmp_path))
    try:  # beside the installed plugins (the reproductions')
        assert "dpdl_test_plugin_ep" in load_plugins(force=True)
        assert "test-ep-threat" in THREAT_REGISTRY
    finally:
        THREAT_REGISTRY.unregister("test-ep-threat")


def test_the_example_runs_from_the_python_api() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300, check=True
    )
    assert "mechanism: tree-pairwise" in result.stdout
    assert "privacy: eps=5 at delta=1e-05 over 50 steps; eavesdropper" in result.stdout


def _cli(*args: str, plugins: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    env.pop(registry.PLUGINS_ENV, None)
    if plugins is not None:
        env[registry.PLUGINS_ENV] = plugins
    return subprocess.run(
        [sys.executable, "-m", "dpdl.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )


def test_the_example_is_a_plugin_of_the_command_line(tmp_path: Path) -> None:
    help_text = _cli("train", "--help", plugins="examples/custom_mechanism.py").stdout
    assert "tree-pairwise" in help_text
    assert "tree-pairwise" not in _cli("train", "--help", plugins=None).stdout
    out = tmp_path / "run"
    run = _cli(
        "train", "--mechanism", "tree-pairwise", "--task", "quadratic", "--graph", "ring",
        "--n", "6", "--steps", "20", "--eps", "3", "--out", str(out), "--no-progress",
        plugins="examples/custom_mechanism.py",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    seed = json.loads((out / "config.json").read_text())["seeds"][0]
    assert seed["mechanism"]["mechanism"] == "tree-pairwise"
    report = seed["privacy"][0]
    assert report["threat"] == "eavesdropper"
    assert report["epsilon"] <= 3.0
    assert report["epsilon"] == pytest.approx(3.0, rel=1e-6)


def test_a_plugin_that_fails_is_one_error_line() -> None:
    result = _cli("train", "--help", plugins="dpdl_no_such_plugin_xyz")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "dpdl: error: DPDL_PLUGINS: plugin 'dpdl_no_such_plugin_xyz' failed to import: "
        "No module named 'dpdl_no_such_plugin_xyz'"
    ]


def test_the_agent_processes_of_run_local_import_the_plugin(tmp_path: Path) -> None:
    run = _cli(
        "run-local", "--mechanism", "tree-pairwise", "--task", "quadratic", "--graph", "ring",
        "--n", "4", "--steps", "5", "--workdir", str(tmp_path / "run"),
        plugins="examples/custom_mechanism.py",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "run" / "models.npy").is_file()


def test_the_audit_audits_a_plugin_mechanism_and_names_an_unknown_one(tmp_path: Path) -> None:
    help_text = _cli("audit", "--help", plugins="examples/custom_mechanism.py").stdout
    assert "tree-pairwise" in help_text
    run = _cli(
        "audit", "--graph", "ring", "--n", "6", "--steps", "20", "--eps", "3",
        "--mechanisms", "tree-pairwise", "ldp", "--attack-trials", "200",
        "--out", str(tmp_path / "audit"), "--no-progress", "--json",
        plugins="examples/custom_mechanism.py",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = {row["method"]: row for row in json.loads(run.stdout.splitlines()[-1])["rows"]}
    assert list(rows) == ["none", "tree-pairwise", "ldp"]
    epsilon = rows["tree-pairwise"]["epsilon"]["eavesdropper"]
    assert epsilon <= 3.0
    assert epsilon == pytest.approx(3.0, rel=1e-6)
    unknown = _cli("audit", "--graph", "ring", "--n", "6", "--mechanisms", "tree-pairwise",
                   "--out", str(tmp_path / "no"), plugins=None)  # fmt: skip
    assert unknown.returncode == 2
    assert "unknown mechanism 'tree-pairwise' to audit; known: none, ldp" in unknown.stderr


@pytest.mark.parametrize(
    "argv",
    [["reproduce", "decor-fig1"], ["reproduce", "--list"], ["sweep", "decor-fig1", "--dry-run"]],
)
def test_without_the_reproductions_the_commands_name_the_package(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """dpdl registers no reproduction and no named sweep of its own: where the reproductions'
    package is not installed, ``dpdl reproduce`` and ``dpdl sweep NAME`` say which to install."""
    from dpdl import cli

    monkeypatch.setattr(choices.REPRODUCTION_REGISTRY, "_entries", {})
    monkeypatch.setattr(choices.SWEEP_REGISTRY, "_entries", {})
    monkeypatch.setattr(registry, "_loaded", True)  # the installed entry points stay unloaded
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert "dpdl-reproductions" in error
    assert "pip install -e reproductions" in error


def test_a_fresh_process_finds_a_plugins_task_when_a_configuration_names_it(
    tmp_path: Path,
) -> None:
    """A worker process (a pool's, Ray's, an agent's) that builds a configuration has not run the
    command line's plugin loading: a task registered only by an installed plugin is still a valid
    choice there, the plugins loaded when the name is not a built-in one."""
    info = tmp_path / "dpdl_test_task_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dpdl-test-task\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dpdl.plugins]\ntest = dpdl_test_plugin_task\n")
    (tmp_path / "dpdl_test_plugin_task.py").write_text(
        "from dpdl.choices import TASK_REGISTRY\n"
        "TASK_REGISTRY.add('test-plugin-task', 'dpdl.tasks.catalog:_quadratic', 'a plugin task')\n"
    )
    script = (
        "from dpdl.jobspec.config import TrainConfig\n"
        "print(TrainConfig(task='test-plugin-task', lr=0.1).task)\n"
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    environment.pop(registry.PLUGINS_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "test-plugin-task"
