"""dpdl: differentially private decentralized learning with correlated noise.

The package is organised in layers (see ``docs/design.md``): :mod:`dpdl.graphs` (topologies, mixing
matrices, spectral facts), :mod:`dpdl.mechanisms` (noise designs), :mod:`dpdl.accounting`
(Gaussian-DP accountant and calibration), :mod:`dpdl.simulation` (the vectorized D-SGD engine),
:mod:`dpdl.tasks` (objectives on real data), :mod:`dpdl.experiments` (runs, reports, the CLI's
jobs).
"""

__version__ = "0.2.0"
