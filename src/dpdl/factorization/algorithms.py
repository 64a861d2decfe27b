"""Linear decentralized learning algorithms as matrices (MAFALDA-SGD, Definition 4 and Appendix A).

A [`LinearAlgorithm`][dpdl.factorization.algorithms.LinearAlgorithm] lists every message of a run as
a row of `M G + N Z` (`Z ~ N(0, I)`, noise scales inside `N`), who sends and who receives it, which
agents need each column of `Z` (the seed's holders), and the algorithm's own encoder `C` with `N C =
M` when its structure gives one (Theorem 6). Data-independent terms (initial models) and the step
size are dropped: they change no privacy guarantee. Constructors:

- [`dp_dsgd`][dpdl.factorization.algorithms.dp_dsgd]: DP-D-SGD, independent noise (A.2): `M = W_T`,
  `N = sigma I`, `C = I / sigma`.
- [`mf_dsgd`][dpdl.factorization.algorithms.mf_dsgd]: MF-D-SGD with any encoder C (Algorithm 1, eq.
  (5)): `N = C^-1`.
- [`antipgd`][dpdl.factorization.algorithms.antipgd]: AntiPGD (Koloskova et al., NeurIPS 2023; A.3):
  noise `z_t - z_{t-1}`.
- [`muffliato`][dpdl.factorization.algorithms.muffliato]: Muffliato-SGD with K gossip rounds per
  gradient (A.4).
- [`from_noise`][dpdl.factorization.algorithms.from_noise]: any per-step covariance design, read
  from its plain description ([`GaussianNoise`][dpdl.accounting.noise.GaussianNoise]: LDP, DECOR,
  Whisper, zero-sum, ...): its private parts and shared secrets become columns of Z (A.5; a per-step
  covariance R is the special encoder `I_T (x) [diag(sigma_private)^-1; 0]`).
- [`zip_dl`][dpdl.factorization.algorithms.zip_dl]: Zip-DL (Biswas et al., PoPETs 2025; A.6): a
  different noise on every message.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from dpdl.accounting.noise import GaussianNoise, NoiseSource, noise_of
from dpdl.errors import ConfigError
from dpdl.factorization.workload import gossip_sequence, gossip_workload, muffliato_workload

__all__ = [
    "LinearAlgorithm",
    "antipgd",
    "dp_dsgd",
    "from_noise",
    "local_encoder",
    "mf_dsgd",
    "muffliato",
    "zip_dl",
]


@dataclass(frozen=True)
class LinearAlgorithm:
    """The messages `M G + N Z` of a linear decentralized algorithm, with their routing.

    Attributes:
        name: what it is, for reports.
        n, steps: agents and gradient steps; gradients are `n steps` time-major rows.
        gradients: `M`, `(messages, n steps)`.
        noise: `N`, `(messages, seeds)`.
        senders: `(messages,)` agent that sends each message.
        receivers: `(messages, n)` boolean, who receives each message.
        holders: `(seeds, n)` boolean, which agents need (so know) each seed.
        encoder: `C` with `N C = M` built from the algorithm's structure, or None.
    """

    name: str
    n: int
    steps: int
    gradients: np.ndarray
    noise: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray
    holders: np.ndarray
    encoder: np.ndarray | None = None

    def __post_init__(self) -> None:
        messages = self.gradients.shape[0]
        if self.gradients.shape != (messages, self.n * self.steps):
            raise ConfigError(
                f"M must be (messages, n T) = (., {self.n * self.steps}), got "
                f"{self.gradients.shape}"
            )
        if (
            self.noise.shape[0] != messages
            or self.senders.shape != (messages,)
            or self.receivers.shape != (messages, self.n)
        ):
            raise ConfigError("M, N, senders and receivers must have one row per message")
        if self.holders.shape != (self.noise.shape[1], self.n):
            raise ConfigError(
                f"holders must be (seeds, n) = ({self.noise.shape[1]}, {self.n}), got "
                f"{self.holders.shape}"
            )

    def agent_of_row(self) -> np.ndarray:
        """Agent whose gradient each column of `M` is (time-major: column `t n + u` is u)."""
        return np.tile(np.arange(self.n), self.steps)


def _broadcast(
    name: str,
    sequence: list[np.ndarray],
    steps: int,
    workload: np.ndarray,
    injection: sparse.spmatrix,
    encoder: np.ndarray | None,
) -> LinearAlgorithm:
    """An algorithm in which, at gossip round r, agent u sends one message to every v with
    `W_r[v, u] > 0`: messages `workload (G + injection Z)`; seed j is held by the agents whose
    injected noise uses it."""
    n = sequence[0].shape[0]
    senders = np.tile(np.arange(n), len(sequence))
    receivers = np.concatenate([(w.T > 0) & ~np.eye(n, dtype=bool) for w in sequence])
    injection = sparse.csr_matrix(injection)  # block structured: dense products would cost (n T)^3
    holders = np.zeros((injection.shape[1], n), dtype=bool)
    rows, cols = injection.nonzero()
    holders[cols, rows % n] = True
    noise = np.asarray((injection.T @ workload.T).T)
    return LinearAlgorithm(name, n, steps, workload, noise, senders, receivers, holders, encoder)


def local_encoder(local: np.ndarray, n: int) -> np.ndarray:
    """`C_local (x) I_n` in time-major order: every agent correlates its own noise over time."""
    return np.kron(local, np.eye(n))


def dp_dsgd(weights: np.ndarray, steps: int, sigma: float = 1.0) -> LinearAlgorithm:
    """DP-D-SGD: D-SGD with independent noise `N(0, sigma^2)` per agent and step (A.2)."""
    return muffliato(weights, steps, 1, sigma)


def mf_dsgd(
    weights: np.ndarray, steps: int, encoder: np.ndarray, sigma: float = 1.0, name: str = "MF-D-SGD"
) -> LinearAlgorithm:
    """MF-D-SGD (Algorithm 1): noise `C^-1 Z`, `Z ~ N(0, sigma^2 I)`, for an invertible encoder C
    (`n T x n T`; use [`local_encoder`][dpdl.factorization.algorithms.local_encoder] for `C_local
    (x) I_n`)."""
    sequence = gossip_sequence(weights, steps)
    n = sequence[0].shape[0]
    encoder = np.asarray(encoder, dtype=float)
    if encoder.shape != (n * steps, n * steps):
        raise ConfigError(
            f"the encoder must be (n T) x (n T) = {n * steps} x {n * steps}, got {encoder.shape}"
        )
    if np.linalg.matrix_rank(encoder) < n * steps:
        raise ConfigError("the encoder C must be invertible (the noise is C^-1 Z)")
    return _broadcast(
        name,
        sequence,
        steps,
        gossip_workload(sequence, steps),
        sigma * sparse.csr_matrix(np.linalg.inv(encoder)),
        encoder / sigma,
    )


def antipgd(weights: np.ndarray, steps: int, sigma: float = 1.0) -> LinearAlgorithm:
    """AntiPGD: agent u adds `z_t - z_{t-1}` (A.3): `C = 1_{t >= t'} (x) I_n`."""
    n = np.asarray(weights).shape[-1]
    return mf_dsgd(
        weights, steps, local_encoder(np.tril(np.ones((steps, steps))), n), sigma, name="AntiPGD"
    )


def muffliato(weights: np.ndarray, steps: int, rounds: int, sigma: float = 1.0) -> LinearAlgorithm:
    """Muffliato-SGD: independent noise `N(0, sigma^2)`, then `rounds` gossip rounds per
    gradient step, each round a message (A.4); one round is DP-D-SGD (A.2)."""
    sequence = gossip_sequence(weights, steps * rounds)
    n = sequence[0].shape[0]
    name = "DP-D-SGD" if rounds == 1 else f"Muffliato-SGD (K={rounds})"
    injection = sigma * sparse.identity(n * steps, format="csr")
    return _broadcast(
        name,
        sequence,
        steps,
        muffliato_workload(sequence, steps, rounds),
        injection,
        np.eye(n * steps) / sigma,
    )


def from_noise(
    source: GaussianNoise | NoiseSource, weights: np.ndarray, steps: int, name: str | None = None
) -> LinearAlgorithm:
    """D-SGD with a per-step noise design: `v_t = diag(sigma_private) z_t + F s_t` with `F` the
    shared secrets of the noise `source` describes (a description, or a mechanism holding one),
    each secret's seed held by its holders (A.5 for DECOR). `name`: the algorithm's label
    (default: the noise's, then `source`'s `name`)."""
    noise = noise_of(source)
    n = noise.n
    generator = noise.generator.toarray() if sparse.issparse(noise.generator) else noise.generator
    private = np.sqrt(noise.private_variances)
    injection = sparse.kron(
        sparse.identity(steps), np.hstack([np.diag(private), generator]), format="csr"
    )
    encoder = None
    if (private > 0).all():
        encoder = np.kron(
            np.eye(steps), np.vstack([np.diag(1.0 / private), np.zeros((generator.shape[1], n))])
        )
    sequence = gossip_sequence(weights, steps)
    return _broadcast(
        name or noise.name or getattr(source, "name", "") or "D-SGD",
        sequence,
        steps,
        gossip_workload(sequence, steps),
        injection,
        encoder,
    )


def zip_dl(weights: np.ndarray, steps: int, sigma: float = 1.0) -> LinearAlgorithm:
    """Zip-DL: agent i draws `z_ij ~ N(0, sigma^2)` for every j of its closed neighbourhood and
    sends `y_i + z_ij - sum_k W_ki z_ik` to j, so the noise its receivers average in cancels
    (`sum_j W_ji n_ij = 0`, column-stochastic W); messages are per edge (A.6). Built by
    propagating the linear maps of G and Z through the rounds (models
    `x_{t+1} = sum_i W_ji m_ij`)."""
    sequence = gossip_sequence(weights, steps)
    n = sequence[0].shape[0]
    rows_g, rows_z, senders, receivers, holders = [], [], [], [], []
    state_g = np.zeros((n, n * steps))
    seeds_per_step = [np.argwhere(w.T > 0) for w in sequence]  # (sender i, receiver j) incl. i = j
    total_seeds = sum(len(pairs) for pairs in seeds_per_step)
    state_z = np.zeros((n, total_seeds))
    offset = 0
    for t, (w, pairs) in enumerate(zip(sequence, seeds_per_step, strict=True)):
        y_g = state_g.copy()
        y_g[:, t * n : (t + 1) * n] += np.eye(n)
        seed_index = offset + np.arange(len(pairs))
        own = np.zeros((n, total_seeds))  # sum_k W_ki z_ik, per sender i
        own[pairs[:, 0], seed_index] = w[pairs[:, 1], pairs[:, 0]]
        noise = np.zeros((len(pairs), total_seeds))
        noise[np.arange(len(pairs)), seed_index] = sigma
        noise -= sigma * own[pairs[:, 0]]
        message_g = y_g[pairs[:, 0]]
        message_z = state_z[pairs[:, 0]] + noise
        sent = pairs[:, 0] != pairs[:, 1]
        rows_g.append(message_g[sent])
        rows_z.append(message_z[sent])
        senders.append(pairs[sent, 0])
        receivers.append(np.eye(n, dtype=bool)[pairs[sent, 1]])
        seed_holders = np.zeros((len(pairs), n), dtype=bool)
        seed_holders[np.arange(len(pairs)), pairs[:, 0]] = True
        holders.append(seed_holders)
        weight = w[pairs[:, 1], pairs[:, 0]][:, None]
        state_g = np.zeros((n, n * steps))
        state_z = np.zeros((n, total_seeds))
        np.add.at(state_g, pairs[:, 1], weight * message_g)
        np.add.at(state_z, pairs[:, 1], weight * message_z)
        offset += len(pairs)
    return LinearAlgorithm(
        "Zip-DL",
        n,
        steps,
        np.vstack(rows_g),
        np.vstack(rows_z),
        np.concatenate(senders),
        np.vstack(receivers),
        np.vstack(holders),
    )
