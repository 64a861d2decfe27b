"""Simulation: the vectorized D-SGD engine, its samplers and step-size schedules."""

from dpdl.simulation.dsgd import CLIP_LEVELS, DSGDConfig, DSGDResult, clip_rows, run_dsgd
from dpdl.simulation.sampling import SAMPLERS, CyclicSampler, PoissonSampler, UniformSampler
from dpdl.simulation.schedules import SCHEDULES, StepSize

__all__ = [
    "CLIP_LEVELS",
    "SAMPLERS",
    "SCHEDULES",
    "DSGDConfig",
    "DSGDResult",
    "CyclicSampler",
    "PoissonSampler",
    "StepSize",
    "UniformSampler",
    "clip_rows",
    "run_dsgd",
]
