"""Simulation: the vectorized D-SGD and gradient-tracking engines, their samplers and step sizes."""

from dpdl.simulation.dsgd import CLIP_LEVELS, DSGDConfig, DSGDResult, clip_rows, run_dsgd
from dpdl.simulation.sampling import SAMPLERS, CyclicSampler, PoissonSampler, UniformSampler
from dpdl.simulation.schedules import SCHEDULES, StepSize
from dpdl.simulation.tracking import run_dsgt

#: Version of the numbers a seed produces: the samplers, the noise streams and the engines'
#: arithmetic. Bump it in any change that moves seeded results (a different draw, another order of
#: operations, a changed default), so that cached reproduction runs made before are recomputed
#: (:mod:`dpdl.experiments.reproduce.runner`) and runtime checkpoints made before are refused
#: (:mod:`dpdl.runtime.checkpoint`) instead of being mixed with new numbers.
ENGINE_VERSION = 1

#: The engines a training job can run: D-SGD, and gradient tracking (DSGT).
ALGORITHMS = ("dsgd", "dsgt")

__all__ = [
    "ALGORITHMS",
    "ENGINE_VERSION",
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
