"""DECOR Fig. 1's least squares as the authors' released code runs it (`quadratics.py` and
`utils/plotting.py: loss_epsilon` of their repository), beside the paper's protocol in
`decor-fig1`: both are grids of its sweep file, the authors' those whose models start at ones.

What differs from the paper's text, which `decor-fig1` follows: T = 3500 steps at the fixed step
size 1.668e-3 and C = 1 (no tuning but DECOR's noise couple, the one of lowest loss among its
Appendix D search, as the authors' search files keep), every model starts at the all-ones point
(`--start ones`), and the metric is the mean over agents of `||x_i - x*||^2` averaged over the
last iterates (`--average-last 200`: the task's `squared_distance_tail`), over 5 seeds.

The code's average is `errors[-200:-1]` of its T + 1 records: the 199 iterates of steps
T - 199 .. T - 1, one short of "the last 200". dpdl averages the 200 of steps T - 199 .. T, the
same 199 and the last one: dpdl's mean is `(199 m + e_T) / 200`, `m` the code's mean and
`e_T` the last error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpdl_reproductions import tradeoff
from dpdl_reproductions.tradeoff import Job

__all__ = [
    "AVERAGE_LAST",
    "CLIP",
    "METRIC",
    "PROTOCOL",
    "SEEDS",
    "START",
    "STEPS",
    "STEP_SIZE",
    "job_of",
    "ones",
]

PROTOCOL = "authors"
STEPS = 3500
STEP_SIZE = 1.668e-3
CLIP = 1.0
SEEDS = 5
#: Every model's starting point (``TrainConfig.task_options.start``, :func:`ones`): what marks the
#: protocol's runs in the sweep file.
START = "ones"
#: How many iterates the metric averages (``TrainConfig.average_last``), and the metric.
AVERAGE_LAST = 200
METRIC = "squared_distance_tail"


def job_of(options: Mapping[str, Any], version: int = tradeoff.VERSION) -> Job:
    """The job of one run of decor-fig1's sweep file: a run whose models start at ones is one of
    the authors' protocol (it names it), any other one of the paper's
    (`tradeoff.job_of`)."""
    job = tradeoff.job_of(options, version)
    return {**job, "protocol": PROTOCOL} if options["start"] == START else job


def ones(dim: int) -> np.ndarray:
    """The starting point `ones` (registered in `dpdl.choices.START_REGISTRY` by
    `plugin`): every coordinate 1, where DECOR's released
    `quadratics.py` starts every model."""
    return np.ones(dim)
