"""Every top-level module of dpdl has a place in the layers contract (pyproject.toml,
``[tool.importlinter]``; docs/design.md, "Layers"): a new module must be placed, not forgotten.
Whether the imports keep to the layers is ``lint-imports``' job (make lint)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import dpdl

ROOT = Path(__file__).resolve().parents[1]


def test_every_top_level_module_has_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [
        contract["layers"] for contract in config["contracts"] if contract["type"] == "layers"
    ]
    placed = {name.strip("() ") for layer in layers for name in re.split(r"[|:]", layer)}
    package = Path(dpdl.__file__).parent
    modules = {f"dpdl.{path.stem}" for path in package.glob("*.py") if path.stem != "__init__"}
    modules |= {f"dpdl.{path.parent.name}" for path in package.glob("*/__init__.py")}
    assert sorted(modules - placed) == []
    assert placed - modules <= {"dpdl.spec"}  # the job spec layer, optional until it lands
