"""The eavesdropper that adds up every message it sees.

Zero-sum noise (pairwise-cancelling terms; LPPA's noise flow, whose differences sum to zero by
construction) hides each message but not their sum: the eavesdropper recovers the network's
aggregate gradient exactly (LPPA, Theorem 1's proof, read as an attack; CorN-DSGD guideline (G1)).
Against noise with `1^T R 1 > 0` the aggregate it recovers carries noise of that variance.
"""

from __future__ import annotations

import numpy as np

from dpdl.attacks.membership import Sampled

__all__ = ["sum_attack", "sum_attack_error"]


def sum_attack(messages: np.ndarray) -> np.ndarray:
    """The eavesdropper's estimate of the aggregate gradient: the sum of every agent's message
    (noisy gradients, or LPPA's initial tracking variables `gamma^0`), `(n, d) -> (d,)`."""
    return np.asarray(messages).sum(axis=0)


def sum_attack_error(noise: Sampled, gradients: np.ndarray, rng: np.random.Generator) -> float:
    """RMS error per coordinate of `sum_attack` on `gradients + noise` against the true
    aggregate `gradients.sum(axis=0)`, measured on one draw of the noise, `(n, d)` gradients."""
    messages = gradients + noise.sample(rng, gradients.shape[1])
    return float(np.sqrt(np.mean((sum_attack(messages) - gradients.sum(axis=0)) ** 2)))
