"""The local encoders of MF-D-SGD (MAFALDA-SGD, Section 6 and Algorithm 1), by name: the targets
of `dpdl.choices.FACTORIZED_REGISTRY`.

Each is called `factory(weights, participation)` (the gossip's mixing matrix and the records'
participation scheme) and returns `C_local`, lower triangular `T x T`, or one per agent
`n x T x T`:

- `dp-dsgd`: independent noise, `C_local = I` (sensitivity `sqrt(k)` under cyclic
  `(k, b)`-participation);
- `antipgd`: the previous step's noise subtracted, `C_local = 1_{t >= s}` (Koloskova et al.,
  ICML 2023; MAFALDA-SGD eq. (12));
- `mafalda`: one encoder optimised for the gossip's error (Lemma 12, Algorithm 2;
  [`optimize_local`][dpdl.factorization.mafalda.optimize_local]);
- `mafalda-l`: every agent's own, optimised for its share of that error (MAFALDA-L-SGD of the
  authors' code; [`optimize_agents`][dpdl.factorization.mafalda.optimize_agents]).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from dpdl.factorization.mafalda import (
    agent_utility_grams,
    optimize_agents,
    optimize_local,
    utility_gram,
)
from dpdl.factorization.participation import Participation

__all__ = ["ONE_THREAD", "antipgd", "dp_dsgd", "mafalda", "mafalda_l"]

#: The BLAS threads the optimised encoders are computed on: L-BFGS's iterates depend on the
#: rounding of its matrix products, which depends on how many threads share them (the encoder of
#: the Florentine families over T = 320 differs in its last digits between one and two threads),
#: so one thread makes the encoder, and every run with it, the same on every machine.
ONE_THREAD = 1


def dp_dsgd(weights: np.ndarray, participation: Participation) -> np.ndarray:
    """`C_local = I`: DP-D-SGD's independent noise."""
    return np.eye(participation.steps)


def antipgd(weights: np.ndarray, participation: Participation) -> np.ndarray:
    """`C_local = 1_{t >= s}`: the noise `z_t - z_{t-1}` of anti-correlated perturbed GD."""
    return np.tril(np.ones((participation.steps, participation.steps)))


def mafalda(weights: np.ndarray, participation: Participation) -> np.ndarray:
    """MAFALDA-SGD's encoder for the gossip `weights`
    ([`optimize_local`][dpdl.factorization.mafalda.optimize_local]), on one BLAS thread
    (`ONE_THREAD`)."""
    with threadpool_limits(limits=ONE_THREAD):
        gram = utility_gram(_dense(weights), participation.steps)
        return optimize_local(gram, participation).encoder


def mafalda_l(weights: np.ndarray, participation: Participation) -> np.ndarray:
    """MAFALDA-L-SGD's encoders, one per agent (`n x T x T`;
    [`optimize_agents`][dpdl.factorization.mafalda.optimize_agents]), on one BLAS thread
    (`ONE_THREAD`)."""
    with threadpool_limits(limits=ONE_THREAD):
        grams = agent_utility_grams(_dense(weights), participation.steps)
        return np.stack([result.encoder for result in optimize_agents(grams, participation)])


def _dense(weights: np.ndarray) -> np.ndarray:
    """The gossip as a dense array (the utility's Gram matrices diagonalise it)."""
    return weights.toarray() if sparse.issparse(weights) else np.asarray(weights)
