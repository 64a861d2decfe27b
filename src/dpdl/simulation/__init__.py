"""Simulation: the vectorized D-SGD and gradient-tracking engines, their samplers and step sizes.

The engines' configuration (:class:`DSGDConfig`, :class:`StepSize`) lives in the job spec below
(:mod:`dpdl.jobspec.engine`), which builds it; it is re-exported here. The names are imported on first use (:mod:`dpdl.lazy`), so that :func:`clip_rows` or a step size
does not import the engines' dependencies (tqdm, the mechanisms, gradient tracking's graphs).
"""

from dpdl.choices import ALGORITHMS
from dpdl.lazy import lazy_exports

#: Version of the numbers a seed produces: the samplers, the noise streams and the engines'
#: arithmetic. Bump it in any change that moves seeded results (a different draw, another order of
#: operations, a changed default), so that cached reproduction runs made before are recomputed
#: (:mod:`dpdl.experiments.reproduce.runner`) and runtime checkpoints made before are refused
#: (:mod:`dpdl.runtime.checkpoint`) instead of being mixed with new numbers.
#: 2: singular designs (zero-sum noise, LPPA's flow) sample with their null directions exactly zero.
ENGINE_VERSION = 2

_exports, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "dsgd": ("CLIP_LEVELS", "DSGDConfig", "DSGDResult", "StepSize", "clip_rows", "run_dsgd"),
        "sampling": ("SAMPLERS", "CyclicSampler", "PoissonSampler", "UniformSampler"),
        "tracking": ("run_dsgt",),
    },
)
__all__ = ["ALGORITHMS", "ENGINE_VERSION", *_exports]
