"""dpdl: differentially private decentralized learning with correlated noise.

The package is organised in layers (see `docs/design.md`): [`dpdl.graphs`][dpdl.graphs] (topologies,
mixing matrices, spectral facts), `dpdl.mechanisms` (noise designs), `dpdl.accounting` (Gaussian-DP
accountant and calibration), `dpdl.simulation` (the vectorized D-SGD engine), `dpdl.tasks`
(objectives on real data), `dpdl.experiments` (runs, reports, the CLI's jobs).

Bring your own model, data and graph: [`dpdl.fit`][dpdl.experiments.fit.fit] trains a torch model by
noisy D-SGD on any graph and accounts its privacy;
[`dpdl.design_noise`][dpdl.experiments.fit.design_noise] is a calibrated noise design alone, for a
training loop of your own (`dpdl.experiments.fit`); [`dpdl.tune`][dpdl.experiments.tune.tune]
searches the step size of `fit` on a validation split of the training data, and
[`dpdl.diagnose`][dpdl.experiments.tune.diagnose] runs a configuration again without noise, clipped
and unclipped ([`dpdl.experiments.tune`][dpdl.experiments.tune]);
[`dpdl.load_models`][dpdl.experiments.saved_models.load_models] reads back the models that `dpdl
train --save-models` and `FitResult.save` write
([`dpdl.experiments.saved_models`][dpdl.experiments.saved_models]). They are imported on first use,
so `import dpdl` stays light.
"""

from dpdl.lazy import lazy_exports

__version__ = "0.2.0"

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "dpdl.experiments.fit": ("FitResult", "design_noise", "fit"),
        "dpdl.experiments.saved_models": ("SavedModels", "load_models"),
        "dpdl.experiments.tune": ("Diagnosis", "TuneResult", "diagnose", "tune"),
    },
)
