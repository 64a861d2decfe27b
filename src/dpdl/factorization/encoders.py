"""The local encoders of MF-D-SGD (MAFALDA-SGD, Section 6 and Algorithm 1), by name: the targets
of `dpdl.choices.FACTORIZED_REGISTRY`.

Each is called `factory(weights, participation, **options)` (the gossip's mixing matrix, the
records' participation scheme, and the options of `dpdl.choices.FACTORIZED_OPTIONS` the run gives,
`bands` or `buffer`) and returns `C_local`, lower triangular `T x T`, or one per agent `n x T x
T`, or a [`Strategy`][dpdl.factorization.strategy.Strategy] (the encoder with what its noise
stream needs to keep little state):

- `dp-dsgd`: independent noise, `C_local = I`: the identity factorization (sensitivity
  `sqrt(k)` under cyclic `(k, b)`-participation);
- `antipgd`: the previous step's noise subtracted, `C_local = 1_{t >= s}` (Koloskova et al.,
  ICML 2023; MAFALDA-SGD eq. (12));
- `mafalda`: one encoder optimised for the gossip's error (Lemma 12, Algorithm 2;
  [`optimize_local`][dpdl.factorization.mafalda.optimize_local]);
- `mafalda-l`: every agent's own, optimised for its share of that error (MAFALDA-L-SGD of the
  authors' code; [`optimize_agents`][dpdl.factorization.mafalda.optimize_agents]);
- `sqrt`, `bsr`, `bandmf`, `bisr`: the square-root factorization and its banded relatives
  ([`toeplitz`][dpdl.factorization.toeplitz]), `bands` coefficients (default: the participation's
  separation, the cycle b);
- `blt`: a buffered linear Toeplitz encoder of buffer size `buffer` (default 4) optimised for the
  gossip ([`blt`][dpdl.factorization.blt]).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from dpdl.factorization.blt import DEFAULT_BUFFER, blt_strategy
from dpdl.factorization.mafalda import (
    agent_utility_grams,
    optimize_agents,
    optimize_local,
    utility_gram,
)
from dpdl.factorization.participation import Participation
from dpdl.factorization.strategy import Strategy
from dpdl.factorization.toeplitz import (
    bandmf_encoder,
    bisr_strategy,
    bsr_encoder,
    sqrt_strategy,
)

__all__ = [
    "ONE_THREAD",
    "antipgd",
    "bandmf",
    "bisr",
    "blt",
    "bsr",
    "dp_dsgd",
    "mafalda",
    "mafalda_l",
    "sqrt",
]

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


def sqrt(weights: np.ndarray, participation: Participation) -> Strategy:
    """The square-root factorization `C = A^(1/2)` (Fichtenberger et al. 2023), with its exact
    inverse ([`sqrt_strategy`][dpdl.factorization.toeplitz.sqrt_strategy])."""
    return sqrt_strategy(participation)


def bsr(weights: np.ndarray, participation: Participation, bands: int | None = None) -> np.ndarray:
    """The banded square root (Kalinin and Lampert 2024;
    [`bsr_encoder`][dpdl.factorization.toeplitz.bsr_encoder])."""
    return bsr_encoder(participation, bands)


def bandmf(
    weights: np.ndarray, participation: Participation, bands: int | None = None
) -> np.ndarray:
    """BandMF optimised for the gossip `weights`
    ([`bandmf_encoder`][dpdl.factorization.toeplitz.bandmf_encoder]), on one BLAS thread
    (`ONE_THREAD`)."""
    with threadpool_limits(limits=ONE_THREAD):
        gram = utility_gram(_dense(weights), participation.steps)
        return bandmf_encoder(gram, participation, bands)


def bisr(weights: np.ndarray, participation: Participation, bands: int | None = None) -> Strategy:
    """The banded inverse square root (Kalinin et al. 2026;
    [`bisr_strategy`][dpdl.factorization.toeplitz.bisr_strategy])."""
    return bisr_strategy(participation, bands)


def blt(weights: np.ndarray, participation: Participation, buffer: int | None = None) -> Strategy:
    """The buffered linear Toeplitz encoder optimised for the gossip `weights`
    ([`blt_strategy`][dpdl.factorization.blt.blt_strategy]; buffer size `DEFAULT_BUFFER` unless
    given), on one BLAS thread (`ONE_THREAD`)."""
    with threadpool_limits(limits=ONE_THREAD):
        gram = utility_gram(_dense(weights), participation.steps)
        return blt_strategy(gram, participation, DEFAULT_BUFFER if buffer is None else buffer)


def _dense(weights: np.ndarray) -> np.ndarray:
    """The gossip as a dense array (the utility's Gram matrices diagonalise it)."""
    return weights.toarray() if sparse.issparse(weights) else np.asarray(weights)
