"""Per-round Gaussian noise as plain data: what the accountant reads, whatever mechanism made it.

The accountant never imports a mechanism. As dp_accounting describes every mechanism by a
plain-data event (`GaussianDpEvent`, ...) that its accountants read, every dpdl noise design
describes one round's noise by a [`GaussianNoise`][dpdl.accounting.noise.GaussianNoise]:

- a *private* part per agent, `N(0, private_variances[i])`, from a seed only agent i holds;
- *shared secrets* ([`SharedSecret`][dpdl.accounting.noise.SharedSecret]): a seed known to a set of
  agents (its holders), from which each holder computes its row of `F z`, `z ~ N(0, I_r)`,
  contributing `F F^T` on holders x holders.

So `R = diag(private) + sum_k F_k F_k^T` (CorN-DSGD Section III; DECOR Algorithm 1), and what
a coalition I cannot subtract is `R^(I)`: the private parts of non-members and the secrets none
of its members holds (CorN-DSGD Section V-D; DECOR Theorem 6).

Which noise is accounted here: every [`NoiseMechanism`][dpdl.mechanisms.base.NoiseMechanism] (its
`noise`). Noise correlated over time
([`dpdl.mechanisms.time_correlated`][dpdl.mechanisms.time_correlated]) is accounted by the
matrix-factorization sensitivity of its encoder
([`dpdl.factorization.mafalda`][dpdl.factorization.mafalda]), not per round; the injections into
gradient tracking ([`TrackingNoise`][dpdl.mechanisms.lppa.TrackingNoise]) are sized for the attacks,
not for a budget, and are not accounted (their Gaussian per-step counterpart,
[`NoiseFlow`][dpdl.mechanisms.lppa.NoiseFlow], is).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scipy import sparse

__all__ = [
    "GaussianNoise",
    "NoiseSource",
    "ScalableNoise",
    "SharedSecret",
    "noise_of",
    "psd_root",
]

#: Entries up to which a coalition's factor is built dense even from a sparse generator (a
#: million: 8 MB); larger ones (DECOR on a large graph) stay sparse.
DENSE_FACTOR_ENTRIES = 2**20

#: Multiply-adds of a dense matrix product that cost about as much as one normal draw (one
#: thread; measured here at 100-300), which decides how the simulation draws
#: (:attr:`GaussianNoise.sampling_factor`).
MULTIPLY_ADDS_PER_NORMAL = 100


def psd_root(matrix: np.ndarray, tolerance: float = 1e-9, scale: float | None = None) -> np.ndarray:
    """The principal square root `R^1/2 = V diag(sqrt w) V^T` of a symmetric positive
    semidefinite `R = V diag(w) V^T`. Eigenvalues within rounding of zero are zero; one below
    `-tolerance * scale` is an error, those above it are zero (`scale`: the size rounding is
    judged against, by default the largest eigenvalue).

    Noise is drawn as `R^1/2 z`. Unlike the thin factor `V diag(sqrt w)`, the principal root is
    a continuous function of R alone: where R has repeated eigenvalues (DECOR on a ring or torus,
    whose Laplacians have them) LAPACK may return any basis of their eigenspaces, and another BLAS
    kernel's rounding returns another; `V diag(sqrt w)` then draws other numbers on another
    machine, `R^1/2` the same to rounding. Written here because scipy's `sqrtm` (a Schur
    method for any square matrix) neither uses the symmetry nor sets rounding-negative eigenvalues
    of a singular R (zero-sum noise) to zero.
    """
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2.0)
    top = max(float(values.max(initial=0.0)), 0.0) if scale is None else scale
    if values.size and values.min() < -tolerance * top:
        raise ValueError(
            f"the noise covariance is not positive semidefinite (eigenvalue {values.min():.3g})"
        )
    # A null direction (zero-sum noise cancels exactly in the sum) must not come back as a 1e-8
    # component from sqrt(1e-16), whose sign and size depend on LAPACK's threading.
    values[values <= len(values) * np.finfo(float).eps * top] = 0.0  # and rounding-negative ones
    return (vectors * np.sqrt(values)) @ vectors.T


@dataclass(frozen=True)
class SharedSecret:
    """Noise from one seed known to `holders`: `F z`, `z ~ N(0, I_r)`, on the holders'
    rows."""

    holders: tuple[int, ...]
    factor: np.ndarray  # (len(holders), r)

    def __post_init__(self) -> None:
        if self.factor.ndim != 2 or self.factor.shape[0] != len(self.holders):
            raise ValueError(
                f"a secret's factor must have one row per holder, got {self.factor.shape} for "
                f"{len(self.holders)} holders"
            )


def _layout(secrets: Sequence[SharedSecret]) -> tuple[np.ndarray, np.ndarray]:
    """Every secret's holders, concatenated, and how many each has."""
    counts = np.fromiter((len(secret.holders) for secret in secrets), int, len(secrets))
    holders = np.fromiter(
        (holder for secret in secrets for holder in secret.holders), int, int(counts.sum())
    )
    return holders, counts


def _generator(
    secrets: Sequence[SharedSecret], offsets: np.ndarray, n: int
) -> np.ndarray | sparse.csr_matrix:
    """All secrets' factors side by side as an (n, sum r_k) matrix; sparse unless it is dense.

    Built from the concatenated factors in a few array operations (no per-secret numpy call: a
    DECOR design on the SNAP Facebook graph has 88,234 secrets): secret k's entries, row-major in
    its factor, lie on its holders' rows and its columns `offsets[k] ...`."""
    holders, counts = _layout(secrets)
    widths = np.diff(offsets)
    sizes = counts * widths  # entries per secret
    data = np.concatenate([np.zeros(0), *(secret.factor.reshape(-1) for secret in secrets)])
    rows = np.repeat(holders, np.repeat(widths, counts))
    within = np.arange(len(data)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    cols = np.repeat(offsets[:-1], sizes) + within % np.maximum(np.repeat(widths, sizes), 1)
    matrix = sparse.csr_matrix((data, (rows, cols)), shape=(n, int(offsets[-1])))
    return matrix.toarray() if matrix.nnz > 0.2 * n * max(matrix.shape[1], 1) else matrix


def _holders(secrets: Sequence[SharedSecret], n: int) -> sparse.csr_matrix:
    if not secrets:
        return sparse.csr_matrix((0, n))
    holders, counts = _layout(secrets)
    rows = np.repeat(np.arange(len(secrets)), counts)
    return sparse.csr_matrix((np.ones(len(holders)), (rows, holders)), shape=(len(secrets), n))


def _spans(starts: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """The integers `starts[k] ... starts[k] + widths[k] - 1` for every k, concatenated."""
    ends = np.cumsum(widths)
    total = int(ends[-1]) if len(ends) else 0
    return np.repeat(starts - (ends - widths), widths) + np.arange(total)


@dataclass(frozen=True, eq=False)
class GaussianNoise:
    """One round's Gaussian noise across `n` agents, per coordinate: private variances plus
    shared secrets (see the module docstring). `name` labels it in messages only."""

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
        """(n, total width) generator of all shared noise: the shared part of v is `G z`."""
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
        """`Tr(W R W^T)`: noise variance one gossip round leaves, per coordinate, summed over
        agents (the privacy term of CorN-DSGD Theorem 1, eq. (6)). A sparse W is never multiplied
        by R: `Tr(W R W^T) = sum_i r_i ||W e_i||^2 + ||W G||_F^2` (R's private variances r and
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

    def _hidden_columns(self, members: np.ndarray) -> np.ndarray:
        """Columns of [`generator`][dpdl.accounting.noise.GaussianNoise.generator] of the secrets
        no member of the coalition (a boolean mask) holds."""
        hidden = self._hidden_secrets(members)
        return _spans(self.offsets[hidden], self.offsets[hidden + 1] - self.offsets[hidden])

    def unknown_covariance(self, coalition: Iterable[int] = ()) -> np.ndarray:
        """`R^(I)`: covariance of the noise coalition I cannot reconstruct, the private parts of
        non-members and the secrets none of its members holds (rows and columns of members are
        zero; CorN-DSGD Section V-D, DECOR Theorem 6)."""
        members = np.zeros(self.n, dtype=bool)
        members[list(coalition)] = True
        if not members.any():
            return self.covariance()
        columns = self._hidden_columns(members)
        return np.diag(np.where(members, 0.0, self.private_variances)) + self._gram(columns)

    @functools.cached_property
    def private_stds(self) -> np.ndarray:
        """Each agent's private standard deviation as it samples it, `sqrt` of its variance
        rounded once: what the accountant's factors hold."""
        return np.sqrt(self.private_variances)

    def unknown_factor(self, coalition: Iterable[int] = ()) -> tuple[np.ndarray, np.ndarray]:
        """The honest agents (those not in the coalition) and the factor `B` of the noise the
        coalition cannot subtract, on their rows: `[diag(s) | G_hidden]` (their private standard
        deviations, then the factors of the secrets no member holds; zero columns dropped; sparse
        where the generator is), so that `B B^T` is
        [`unknown_covariance`][dpdl.accounting.noise.GaussianNoise.unknown_covariance] on the
        honest rows, as the agents sample it."""
        members = np.zeros(self.n, dtype=bool)
        members[list(coalition)] = True
        honest = np.flatnonzero(~members)
        columns = self._hidden_columns(members)  # every secret's, for no coalition
        shared = self.generator[:, columns][honest]
        if sparse.issparse(shared) and len(honest) * len(columns) <= DENSE_FACTOR_ENTRIES:
            shared = shared.toarray()  # small: dense products cost less than sparse bookkeeping
        if sparse.issparse(shared):  # DECOR's column per edge: kept sparse for the Gram route
            factor = sparse.hstack([sparse.diags(self.private_stds[honest]), shared], "csc")
            used = np.asarray(abs(factor).sum(axis=0)).ravel() > 0
            return honest, factor[:, used].tocsr()
        factor = np.hstack([np.diag(self.private_stds[honest]), np.asarray(shared)])
        return honest, factor[:, factor.any(axis=0)]

    @functools.cached_property
    def sampling_factor(self) -> np.ndarray | None:
        """`L` (n, k) with `L L^T = R`, k the agents whose noise is not zero (the others' rows are
        zero, theirs the principal root [`psd_root`][dpdl.accounting.noise.psd_root], the same on
        every machine), when drawing `L z` costs less than drawing every secret's `z` (None
        otherwise, and without secrets): the simulation's draw (`NoiseMechanism.sample`).

        A square root of R needs one normal per agent and coordinate where the seed structure needs
        one per agent and one per secret column: DECOR on an Erdos-Renyi graph of 20 agents has 96
        secrets, so `L` draws 20 rows instead of 116. A square root stands in for a Cholesky factor
        because R may be singular (zero-sum noise). `L L^T` is R only to rounding (about `n u
        cond(R)` relative in the Mahalanobis norms): the accountant certifies `L` as it certifies
        the agents' factor and reports the worse
        ([`step_sensitivity`][dpdl.accounting.accountant.step_sensitivity]), so a simulated run
        carries the guarantee it states.
        """
        width = self.generator.shape[1]
        if width == 0:
            return None
        generator = self.generator
        squares = generator.multiply(generator) if sparse.issparse(generator) else generator**2
        shared = np.asarray(squares.sum(axis=1)).ravel()
        agents = np.flatnonzero(self.private_variances + shared > 0)
        if len(agents) * (1 + len(agents) / MULTIPLY_ADDS_PER_NORMAL) >= self.n + width:
            return None  # decided before R is formed: DECOR on a large sparse graph never forms it
        factor = np.zeros((self.n, len(agents)))
        factor[agents] = psd_root(self.covariance()[np.ix_(agents, agents)])
        return factor

    def unknown_to(self, coalition: Iterable[int]) -> GaussianNoise:
        """The noise a coalition cannot subtract, as a description of its own (its covariance is
        [`unknown_covariance`][dpdl.accounting.noise.GaussianNoise.unknown_covariance])."""
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

    def after_dropouts(self, alive: np.ndarray, recovery: bool = False) -> GaussianNoise:
        """The noise of a round in which only the `alive` agents (an `(n,)` mask) send.

        A missing agent's row is zero (it sends nothing; the accountant leaves it out of the
        view). Every secret keeps its holders, since a missing holder still knows the seed (a
        curious agent that missed a round can still subtract it), and its alive holders' rows:

        - `recovery=False`: unchanged. A pairwise-cancelling secret whose other holder is
          missing no longer cancels (DECOR's `v_ij` without its `-v_ij`), and that noise stays
          in the network average.
        - `recovery=True` (dropout-robust seed recovery): the alive holders of secret k, who all
          know its seed and factor, add the missing holders' share between them,
          `F'_i = F_i + (1 / |A_k|) sum_{j in H_k, missing} F_j` for i in `A_k` (the alive
          holders), so that the secret's total `1^T F z` enters the network as designed
          (exactly zero for DECOR's pairs and zero-sum designs; a pair with one holder left
          adds nothing). No further message is needed: each holder learns who is alive from
          the round's liveness exchange (the schedule) before it sends.
        """
        alive = np.asarray(alive, dtype=bool)
        if alive.shape != (self.n,):
            raise ValueError(f"the alive mask has shape {alive.shape}, the noise {self.n} agents")
        if alive.all():
            return self
        secrets = []
        for secret in self.secrets:
            rows = alive[list(secret.holders)]
            factor = np.where(rows[:, None], secret.factor, 0.0)
            if recovery and rows.any() and not rows.all():
                missing = secret.factor[~rows].sum(axis=0)
                factor[rows] += missing / rows.sum()
            secrets.append(SharedSecret(secret.holders, factor))
        private = np.where(alive, self.private_variances, 0.0)
        return GaussianNoise(self.n, private, tuple(secrets), self.name)

    def secrets_of(self, agent: int) -> list[int]:
        """Indices of the secrets whose seed `agent` holds."""
        return [int(k) for k in self.holder_matrix[:, agent].nonzero()[0]]

    def scaled(self, factor: float) -> GaussianNoise:
        """The same noise with every standard deviation multiplied by `factor`."""
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
    """A noise source that can be rescaled (what
    [`noise_scale`][dpdl.accounting.calibration.noise_scale] sizes):
    [`GaussianNoise`][dpdl.accounting.noise.GaussianNoise] itself, or a mechanism with its own
    `scaled`."""

    name: str

    def scaled(self, factor: float) -> ScalableNoise: ...


def noise_of(source: GaussianNoise | NoiseSource) -> GaussianNoise:
    """The description of `source`: itself if it is one, else its `noise`."""
    return source if isinstance(source, GaussianNoise) else source.noise
