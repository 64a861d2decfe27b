"""dpdl: differentially private decentralized learning with correlated noise.

The package is organised in layers (see ``docs/design.md``): :mod:`dpdl.graphs` (topologies, mixing
matrices, spectral facts), :mod:`dpdl.mechanisms` (noise designs), :mod:`dpdl.accounting`
(Gaussian-DP accountant and calibration), :mod:`dpdl.simulation` (the vectorized D-SGD engine),
:mod:`dpdl.tasks` (objectives on real data), :mod:`dpdl.experiments` (runs, reports, the CLI's
jobs).

Bring your own model, data and graph: :func:`dpdl.fit` trains a torch model by noisy D-SGD on any
graph and accounts its privacy; :func:`dpdl.design_noise` is a calibrated noise design alone, for a
training loop of your own (:mod:`dpdl.experiments.fit`); :func:`dpdl.tune` searches the step size
of ``fit`` on a validation split of the training data, and :func:`dpdl.diagnose` runs a
configuration again without noise, clipped and unclipped (:mod:`dpdl.experiments.tune`);
:func:`dpdl.load_models` reads back the models that ``dpdl train --save-models`` and
``FitResult.save`` write (:mod:`dpdl.experiments.saved_models`). They are imported on first use,
so ``import dpdl`` stays light.
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
