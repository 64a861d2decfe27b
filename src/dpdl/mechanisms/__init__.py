"""Noise mechanisms: independent baselines and correlated designs, built from seeds.

The classes live in [`base`][dpdl.mechanisms.base] (the seed structure every design shares),
[`independent`][dpdl.mechanisms.independent] (none, LDP, CDP), [`decor`][dpdl.mechanisms.decor],
[`whisper`][dpdl.mechanisms.whisper] and [`zero_sum`][dpdl.mechanisms.zero_sum]; calibrated
construction by name is
[`dpdl.mechanisms.registry.build_mechanism`][dpdl.mechanisms.registry.build_mechanism]. What the
correlated designs minimise over a whole run is in [`horizon`][dpdl.mechanisms.horizon]
([`Horizon`][dpdl.mechanisms.horizon.Horizon], [`Curvature`][dpdl.mechanisms.horizon.Curvature]).
"""

from dpdl.mechanisms.base import NoiseMechanism, SeedBook, SharedSecret
from dpdl.mechanisms.horizon import Curvature, Horizon
from dpdl.mechanisms.independent import CentralDP, IndependentGaussian, LocalDP, NoNoise

__all__ = [
    "CentralDP",
    "Curvature",
    "Horizon",
    "IndependentGaussian",
    "LocalDP",
    "NoNoise",
    "NoiseMechanism",
    "SeedBook",
    "SharedSecret",
]
