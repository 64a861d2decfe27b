"""The house's layers import downwards only: the simulation, the runtime and the job spec import
nothing from the experiments, and the job spec neither the simulation nor the runtime; and every
top-level module has a place in the layers contract (pyproject.toml, ``[tool.importlinter]``;
docs/design.md, "Layers"), so a new module is placed, not forgotten. The whole contract is
``lint-imports``' job (make lint).

Read from the source with :mod:`ast`, every module file, imports inside functions included (a lazy
import still climbs a layer), so the check imports none of the modules it reads.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

import dpdl

PACKAGE = Path(dpdl.__file__).parent
ROOT = Path(__file__).resolve().parents[2]


def imported_modules(source: str, package: str) -> set[str]:
    """Every module the code ``source`` of a module of ``package`` imports, at any depth, relative
    imports made absolute (``from x import y`` counts as ``x`` and ``x.y``: ``y`` may be a
    module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def climbs(layer: str, above: tuple[str, ...]) -> list[str]:
    """``module imports name`` for every import by a module of ``dpdl.<layer>`` of one of
    ``above``."""
    found = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
        for name in sorted(imported_modules(path.read_text(), package)):
            if any(name == top or name.startswith(f"{top}.") for top in above):
                found.append(f"{path.relative_to(PACKAGE)} imports {name}")
    return found


@pytest.mark.parametrize(
    ("layer", "above"),
    [
        # Accounting reads plain noise descriptions: it knows no mechanism, engine or experiment.
        ("accounting", ("dpdl.mechanisms", "dpdl.runtime", "dpdl.simulation", "dpdl.experiments")),
        ("simulation", ("dpdl.experiments", "dpdl.runtime", "dpdl.cli")),
        ("runtime", ("dpdl.experiments", "dpdl.cli")),
        ("jobspec", ("dpdl.experiments", "dpdl.simulation", "dpdl.runtime", "dpdl.cli")),
    ],
)
def test_no_layer_imports_a_layer_above_it(layer: str, above: tuple[str, ...]) -> None:
    assert list((PACKAGE / layer).rglob("*.py"))
    assert climbs(layer, above) == []


def test_the_check_sees_imports_in_functions_and_relative_ones() -> None:
    source = (
        "import numpy\n\ndef f():\n"
        "    from dpdl.experiments import train\n"
        "    from ..runtime import agent\n"
        "    from . import job\n"
    )
    names = imported_modules(source, "dpdl.jobspec")
    assert {"numpy", "dpdl.experiments.train", "dpdl.runtime.agent", "dpdl.jobspec.job"} <= names


@pytest.mark.parametrize(
    "module", ["settings.py", "jobspec/config.py", "jobspec/__init__.py", "runtime/options.py"]
)
def test_the_declarations_the_parser_reads_are_light(module: str) -> None:
    """The modules ``dpdl --help`` reads the settings from import the standard library and the
    bottom of the house alone (``test_cli_startup`` checks the same by importing, for the libraries
    it names)."""
    path = PACKAGE / module
    package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
    # dpdl.registry: the registries' class and the plugins' loading, standard library only
    allowed = {"dpdl.choices", "dpdl.errors", "dpdl.registry", "dpdl.settings"}
    for name in imported_modules(path.read_text(), package):
        top = name.split(".")[0]
        if top == "dpdl":
            assert name in allowed or name.rsplit(".", 1)[0] in allowed, f"{module} imports {name}"
        else:
            assert top in sys.stdlib_module_names or top == "__future__", f"{module} imports {name}"


def test_every_top_level_module_has_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [
        contract["layers"] for contract in config["contracts"] if contract["type"] == "layers"
    ]
    placed = {name.strip("() ") for layer in layers for name in re.split(r"[|:]", layer)}
    modules = {f"dpdl.{path.stem}" for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    modules |= {f"dpdl.{path.parent.name}" for path in PACKAGE.glob("*/__init__.py")}
    assert sorted(modules - placed) == []
    assert sorted(placed - modules) == []
