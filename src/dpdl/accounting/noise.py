"""Per-round Gaussian noise as plain data: what the accountant reads, whatever mechanism made it.

The accountant never imports a mechanism. As dp_accounting describes every mechanism by a
plain-data event (``GaussianDpEvent``, ...) that its accountants read, every dpdl noise design
describes one round's noise by a :class:`GaussianNoise`:

- a *private* part per agent, ``N(0, private_variances[i])``, from a seed only agent i holds;
- *shared secrets* (:class:`SharedSecret`): a seed known to a set of agents (its holders), from
  which each holder computes its row of ``F z``, ``z ~ N(0, I_r)``, contributing ``F F^T`` on
  holders x holders.

So ``R = diag(private) + sum_k F_k F_k^T`` (CorN-DSGD Section III; DECOR Algorithm 1), and what
a coalition I cannot subtract is ``R^(I)``: the private parts of non-members and the secrets none
of its members holds (CorN-DSGD Section V-D; DECOR Theorem 6).

Which noise is accounted here: every :class:`~dpdl.mechanisms.base.NoiseMechanism` (its
``noise``). Noise correlated over time (:mod:`dpdl.mechanisms.time_correlated`) is accounted by
the matrix-factorization sensitivity of its encoder (:mod:`dpdl.factorization.mafalda`), not per
round; the injections into gradient tracking (:class:`~dpdl.mechanisms.lppa.TrackingNoise`) are
sized for the attacks, not for a budget, and are not accounted (their Gaussian per-step
counterpart, :class:`~dpdl.mechanisms.lppa.NoiseFlow`, is).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scipy import sparse

__all__ = ["GaussianNoise", "NoiseSource", "ScalableNoise", "SharedSecret", "noise_of"]


@dataclass(frozen=True)
class SharedSecret:
    """Noise from one seed known to ``holders``: ``F z``, ``z ~ N(0, I_r)``, on the holders'
    rows."""

    holders: tuple[int, ...]
    factor: np.ndarray  # (len(holders), r)

    def __post_init__(self) -> None:
        if self.factor.ndim != 2 or self.factor.shape[0] != len(self.holders):
            raise ValueError(
                f"a secret's factor must have one row per holder, got {self.factor.shape} for "
                f"{len(self.holders)} holders"
            )


def _generator(
    secrets: Sequence[SharedSecret], offsets: np.ndarray, n: int
) -> np.ndarray | sparse.csr_matrix:
    """All secrets' factors side by side as an (n, sum r_k) matrix; sparse unless it is dense."""
    rows, cols, data = [np.zeros(0, int)], [np.zeros(0, int)], [np.zeros(0)]
    for start, secret in zip(offsets, secrets, strict=False):
        width = secret.factor.shape[1]
        rows.append(np.repeat(np.asarray(secret.holders), width))
        cols.append(np.tile(np.arange(start, start + width), len(secret.holders)))
        data.append(secret.factor.reshape(-1))
    matrix = sparse.csr_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n, int(offsets[-1])),
    )
    return matrix.toarray() if matrix.nnz > 0.2 * n * max(matrix.shape[1], 1) else matrix


def _holders(secrets: Sequence[SharedSecret], n: int) -> sparse.csr_matrix:
    rows = [np.full(len(secret.holders), k) for k, secret in enumerate(secrets)]
    cols = [np.asarray(secret.holders, dtype=int) for secret in secrets]
    if not secrets:
        return sparse.csr_matrix((0, n))
    return sparse.csr_matrix(
        (np.ones(sum(map(len, cols))), (np.concatenate(rows), np.concatenate(cols))),
        shape=(len(secrets), n),
    )


@dataclass(frozen=True, eq=False)
class GaussianNoise:
    """One round's Gaussian noise across ``n`` agents, per coordinate: private variances plus
    shared secrets (see the module docstring). ``name`` labels it in messages only."""

    n: int
    private_variances: np.ndarray
    secrets: tuple[SharedSecret, ...] = ()
    name: str = ""
    #: Column offsets of each secret's factor in :attr:`generator`.
    offsets: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"a mechanism needs n >= 1 agents, got {self.n}")
        private = np.broadcast_to(np.asarray(self.private_variances, dtype=float), (self.n,)).copy()
        if (private < 0).any() or not np.isfinite(private).all():
            raise ValueError("private variances must be finite and >= 0")
        private.flags.writeable = False
        object.__setattr__(self, "private_variances", private)
        object.__setattr__(self, "secrets", tuple(self.secrets))
        offsets = np.concatenate(
            [[0], np.cumsum([sec.factor.shape[1] for sec in self.secrets])]
        ).astype(int)
        object.__setattr__(self, "offsets", offsets)

    @functools.cached_property
    def generator(self) -> np.ndarray | sparse.csr_matrix:
        """(n, total width) generator of all shared noise: the shared part of v is ``G z``."""
        return _generator(self.secrets, self.offsets, self.n)

    @functools.cached_property
    def holder_matrix(self) -> sparse.csr_matrix:
        """(secrets, n) 0/1 matrix: which agent holds which secret."""
        return _holders(self.secrets, self.n)

    def _gram(self, columns: np.ndarray | slice) -> np.ndarray:
        part = self.generator[:, columns]
        product = part @ part.T
        return product.toarray() if sparse.issparse(product) else np.asarray(product)

    def covariance(self) -> np.ndarray:
        """Per-coordinate covariance R (n x n) of one round's noise across agents."""
        return np.diag(self.private_variances) + self._gram(slice(None))

    def variance_after_mixing(self, weights: np.ndarray | sparse.csr_array) -> float:
        """``Tr(W R W^T)``: noise variance one gossip round leaves, per coordinate, summed over
        agents (the privacy term of CorN-DSGD Theorem 1, eq. (6)). A sparse W is never multiplied
        by R: ``Tr(W R W^T) = sum_i r_i ||W e_i||^2 + ||W G||_F^2`` (R's private variances r and
        secrets' generator G), O(nnz) work and memory."""
        if not sparse.issparse(weights):
            return float(np.sum((weights @ self.covariance()) * weights))
        columns = np.asarray(weights.multiply(weights).sum(axis=0)).ravel()
        total = float(columns @ self.private_variances)
        if self.generator.shape[1]:
            mixed = weights @ self.generator
            total += float(
                mixed.multiply(mixed).sum() if sparse.issparse(mixed) else (mixed**2).sum()
            )
        return total

    def _hidden_secrets(self, members: np.ndarray) -> np.ndarray:
        """Indices of the secrets no member of the coalition (a boolean mask) holds."""
        return np.flatnonzero(np.asarray(self.holder_matrix @ members.astype(float)).ravel() == 0)

    def unknown_covariance(self, coalition: Iterable[int] = ()) -> np.ndarray:
        """``R^(I)``: covariance of the noise coalition I cannot reconstruct, the private parts of
        non-members and the secrets none of its members holds (rows and columns of members are
        zero; CorN-DSGD Section V-D, DECOR Theorem 6)."""
        members = np.zeros(self.n, dtype=bool)
        members[list(coalition)] = True
        if not members.any():
            return self.covariance()
        columns = np.concatenate(
            [np.arange(self.offsets[k], self.offsets[k + 1]) for k in self._hidden_secrets(members)]
            or [np.zeros(0, int)]
        )
        return np.diag(np.where(members, 0.0, self.private_variances)) + self._gram(columns)

    def unknown_to(self, coalition: Iterable[int]) -> GaussianNoise:
        """The noise a coalition cannot subtract, as a description of its own (its covariance is
        :meth:`unknown_covariance`)."""
        members = set(coalition)
        if not members:
            return self
        private = np.array(
            [0.0 if i in members else v for i, v in enumerate(self.private_variances)]
        )
        return GaussianNoise(
            self.n,
            private,
            tuple(s for s in self.secrets if not members.intersection(s.holders)),
            self.name,
        )

    def secrets_of(self, agent: int) -> list[int]:
        """Indices of the secrets whose seed ``agent`` holds."""
        return [int(k) for k in self.holder_matrix[:, agent].nonzero()[0]]

    def scaled(self, factor: float) -> GaussianNoise:
        """The same noise with every standard deviation multiplied by ``factor``."""
        return GaussianNoise(
            self.n,
            self.private_variances * factor**2,
            tuple(SharedSecret(s.holders, s.factor * factor) for s in self.secrets),
            self.name,
        )


class NoiseSource(Protocol):
    """What the accountant accepts besides a description: anything holding one (every mechanism)."""

    @property
    def noise(self) -> GaussianNoise: ...


class ScalableNoise(NoiseSource, Protocol):
    """A noise source that can be rescaled (what :func:`~dpdl.accounting.calibration.noise_scale`
    sizes): :class:`GaussianNoise` itself, or a mechanism with its own ``scaled``."""

    name: str

    def scaled(self, factor: float) -> ScalableNoise: ...


def noise_of(source: GaussianNoise | NoiseSource) -> GaussianNoise:
    """The description of ``source``: itself if it is one, else its ``noise``."""
    return source if isinstance(source, GaussianNoise) else source.noise
