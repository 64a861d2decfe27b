"""The decentralized-learning workload `W_T` (MAFALDA-SGD, Figure 1, eq. (5) and Appendix A.7).

With gossip matrix `W_t` applied after step t (0-based), agent u's message at step t is
`theta_{t+1/2} = W_{t-1} theta_{t-1/2} - eta (g_t + noise_t)`, so the stacked messages are
`-eta W_T (G + noise)` plus a data-independent term, where `W_T` is block lower triangular with
`I_n` on the diagonal and block `(i, j) = W_{i-1} ... W_j` below it (`W^{i-j}` for a fixed W).
The models after gossip are `(blockdiag W_t) W_T` applied to the same (eq. (23)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpdl.errors import ConfigError
from dpdl.graphs.mixing import validate_mixing_matrix

__all__ = ["gossip_blocks", "gossip_sequence", "gossip_workload", "muffliato_workload"]


def gossip_sequence(weights: np.ndarray | Sequence[np.ndarray], steps: int) -> list[np.ndarray]:
    """`steps` gossip matrices: a fixed `W` repeated, or a time-varying sequence checked for
    length. Each must be a gossip matrix (Definition 2: nonnegative, row-stochastic); a single
    matrix of a time-varying sequence need not mix on its own."""
    if steps < 1:
        raise ConfigError(f"the number of steps must be >= 1, got {steps}")
    if isinstance(weights, np.ndarray) and weights.ndim == 2:
        fixed = validate_mixing_matrix(weights, doubly_stochastic=False, mixing=False)
        return [fixed] * steps
    sequence = [validate_mixing_matrix(w, doubly_stochastic=False, mixing=False) for w in weights]
    if len(sequence) != steps:
        raise ConfigError(
            f"a time-varying gossip needs one matrix per step: got {len(sequence)} for {steps} "
            "steps"
        )
    if len({w.shape for w in sequence}) != 1:
        raise ConfigError(
            "the gossip matrices of a time-varying sequence must all have the same size"
        )
    return sequence


def gossip_workload(weights: np.ndarray | Sequence[np.ndarray], steps: int) -> np.ndarray:
    """`W_T` (`n T x n T`): block `(i, j) = W_{i-1} ... W_j` for `i > j`, `I_n` for
    `i = j`."""
    sequence = gossip_sequence(weights, steps)
    n = sequence[0].shape[0]
    workload = np.zeros((n * steps, n * steps))
    for j in range(steps):
        block = np.eye(n)
        for i in range(j, steps):
            workload[i * n : (i + 1) * n, j * n : (j + 1) * n] = block
            block = sequence[i] @ block
    return workload


def gossip_blocks(weights: np.ndarray | Sequence[np.ndarray], steps: int) -> np.ndarray:
    """`blockdiag(W_0, ..., W_{T-1})` (`I_T (x) W` for a fixed W): gossip after each step."""
    sequence = gossip_sequence(weights, steps)
    n = sequence[0].shape[0]
    blocks = np.zeros((n * steps, n * steps))
    for t, matrix in enumerate(sequence):
        blocks[t * n : (t + 1) * n, t * n : (t + 1) * n] = matrix
    return blocks


def muffliato_workload(
    weights: np.ndarray | Sequence[np.ndarray], steps: int, rounds: int
) -> np.ndarray:
    """Messages of Muffliato-SGD (Cyffers et al., NeurIPS 2022; MAFALDA-SGD Appendix A.4):
    `rounds` gossip rounds after each of `steps` gradient steps, a message at every round:
    `W_{K T} (I_T (x) [I_n; 0_{(K-1) n x n}])`, `(K T n) x (T n)`."""
    if rounds < 1:
        raise ConfigError(f"Muffliato needs at least one gossip round per step, got {rounds}")
    sequence = gossip_sequence(weights, steps * rounds)
    n = sequence[0].shape[0]
    full = gossip_workload(sequence, steps * rounds)
    injection = np.kron(np.eye(steps), np.vstack([np.eye(n), np.zeros(((rounds - 1) * n, n))]))
    return full @ injection
