"""Simulation: the vectorized D-SGD and gradient-tracking engines, their samplers and step sizes.

The engines' configuration (`DSGDConfig`, `StepSize`), the batch samplers and one agent's local step
live in the job spec below (`dpdl.jobspec`), which the runtime shares; they are re-exported here,
with `ENGINE_VERSION`. The names are imported on first use (`dpdl.lazy`), so that
[`clip_rows`][dpdl.jobspec.step.clip_rows] or a step size does not import the engines' dependencies
(tqdm, the mechanisms, gradient tracking's graphs).
"""

from dpdl.choices import ALGORITHMS
from dpdl.jobspec import ENGINE_VERSION
from dpdl.lazy import lazy_exports

_exports, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "dsgd": ("CLIP_LEVELS", "DSGDConfig", "DSGDResult", "StepSize", "run_dsgd"),
        "dpdl.jobspec.sampling": ("SAMPLERS", "CyclicSampler", "PoissonSampler", "UniformSampler"),
        "dpdl.jobspec.step": ("clip_rows",),
        "resume": ("Checkpoints", "EngineState"),
        "tracking": ("run_dsgt",),
    },
)
__all__ = ["ALGORITHMS", "ENGINE_VERSION", *_exports]
