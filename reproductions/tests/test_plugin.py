"""The reproductions reach dpdl through its registries: every module meets the interface, and the
plugin registers each one, and each sweep file, under its name."""

from __future__ import annotations

from dpdl.choices import REPRODUCTION_REGISTRY
from dpdl.experiments.reproduction import Reproduction, reproductions
from dpdl_reproductions.interface import ReproductionModule
from dpdl_reproductions.reproduce import REPRODUCTIONS


def test_every_reproduction_meets_the_interface_and_is_registered() -> None:
    found = reproductions()
    assert list(found) == list(REPRODUCTIONS)
    for name, module in REPRODUCTIONS.items():
        assert isinstance(module, ReproductionModule), name
        entry = found[name]
        assert isinstance(entry, Reproduction) and entry.name == name
        # the registry's help (what --help shows without importing) is the module's own line
        assert entry.summary.endswith(REPRODUCTION_REGISTRY.helps()[name].rstrip(".") + "."), name
        assert entry.parts == tuple(getattr(module, "PARTS", ()))
        assert (entry.sweep_parts is None) == (not hasattr(module, "SWEEP"))
