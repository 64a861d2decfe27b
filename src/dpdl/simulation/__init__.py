"""Simulation: the vectorized D-SGD and gradient-tracking engines, their samplers and step sizes."""

from dpdl.choices import ALGORITHMS
from dpdl.simulation.dsgd import CLIP_LEVELS, DSGDConfig, DSGDResult, clip_rows, run_dsgd
from dpdl.simulation.sampling import SAMPLERS, CyclicSampler, PoissonSampler, UniformSampler
from dpdl.simulation.schedules import SCHEDULES, StepSize
from dpdl.simulation.tracking import run_dsgt

__all__ = [
    "ALGORITHMS",
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
    "run_dsgt",
]
