"""Noise mechanisms: independent baselines and correlated designs, built from seeds.

The classes live in :mod:`~dpdl.mechanisms.base` (the seed structure every design shares),
:mod:`~dpdl.mechanisms.independent` (none, LDP, CDP), :mod:`~dpdl.mechanisms.decor`,
:mod:`~dpdl.mechanisms.whisper` and :mod:`~dpdl.mechanisms.zero_sum`; calibrated construction by
name is :func:`dpdl.mechanisms.registry.build_mechanism`. What the correlated designs minimise
over a whole run is in :mod:`~dpdl.mechanisms.horizon` (:class:`Horizon`, :class:`Curvature`).
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
