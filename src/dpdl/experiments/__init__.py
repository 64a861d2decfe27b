"""Experiments: training jobs, the headline demo, results folders and figures.

The names are imported on first use (`dpdl.lazy`), so a command that needs one experiment
(`dpdl noise`) does not import the others' torch and matplotlib.
"""

from dpdl.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "demo": ("STEP_SIZE_GRID", "run_demo"),
        "fit": ("FitResult", "design_noise", "fit"),
        "results": ("write_results",),
        "saved_models": ("SavedModels", "load_models"),
        "train": ("TrainConfig", "TrainResult", "run_training"),
    },
)
