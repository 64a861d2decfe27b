"""Whisper D-SGD / CorN-DSGD: noise covariance optimised for the mixing matrix.

Single seed (Whisper D-SGD Algorithm 1; CorN-DSGD Algorithm 1): `R = sigma_mix^2 I + R_cor` solves
problem (9) for the eavesdropper (`dpdl.solvers.whisper_dual.solve_whisper`); every agent
holds the shared seed s and computes its own row of `R_cor^1/2 s_t`, plus its private
`sigma_mix` noise. We split R with the largest private part, `sigma_mix^2 = lambda_min(R)`.

Multiple seeds (CorN-DSGD Section V-D, problem (10)): seed s_k is held by the group H_k and
generates `R_cor^(k)` supported on H_k x H_k; the program protects every agent against every
coalition of q honest-but-curious agents (`dpdl.solvers.coalition.solve_multiseed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse

from dpdl.accounting.calibration import Calibration, safe_scale
from dpdl.accounting.noise import psd_root
from dpdl.mechanisms.base import NoiseMechanism, SharedSecret
from dpdl.scale import require_dense
from dpdl.solvers.whisper_dual import WhisperSolution, solve_weighted, solve_whisper
from dpdl.threats import Colluding, Eavesdropper, ThreatModel

__all__ = ["MultiSeedWhisper", "Whisper", "design_whisper", "disjoint_groups"]

#: How far below zero, relative to the largest, an eigenvalue of a covariance block an SDP solver
#: returned may be and still be taken as zero (CLARABEL's default tolerances are 1e-8).
SOLVER_TOLERANCE = 1e-6


class Whisper(NoiseMechanism):
    """`R = sigma_mix^2 I + R_cor` with `R_cor` generated from one seed held by all agents.

    Built from the eigendecomposition `R = V diag(r) V^T`: `sigma_mix^2 = min r` and
    `R_cor^1/2 = V diag(sqrt(r - min r)) V^T`, so scaling needs no new decomposition. The
    secret's factor is that principal root, not the thin `V diag(sqrt(r - min r))`: it is the
    same whatever basis LAPACK returns for a repeated eigenvalue, so the draws are the same on
    every machine ([`psd_root`][dpdl.accounting.noise.psd_root]).
    """

    name = "whisper"
    default_threat = Eavesdropper()

    def __init__(
        self,
        eigenvalues: np.ndarray,
        eigenvectors: np.ndarray,
        solution: WhisperSolution | None = None,
    ) -> None:
        n = len(eigenvalues)
        sigma_mix2 = float(eigenvalues.min())
        excess = eigenvalues - sigma_mix2
        excess[excess <= 1e-14 * float(excess.max(initial=0.0))] = 0.0
        factor = (eigenvectors * np.sqrt(excess)) @ eigenvectors.T
        secrets = [SharedSecret(tuple(range(n)), factor)] if excess.any() else []
        super().__init__(n, sigma_mix2, secrets)
        self.sigma_mix2 = sigma_mix2
        self.eigenvalues, self.eigenvectors = eigenvalues, eigenvectors
        self.solution = solution

    @classmethod
    def from_covariance(
        cls, covariance: np.ndarray, solution: WhisperSolution | None = None
    ) -> Whisper:
        values, vectors = np.linalg.eigh((covariance + covariance.T) / 2.0)
        return cls(np.clip(values, 0.0, None), vectors, solution)

    def scaled(self, factor: float) -> Whisper:
        return Whisper(factor**2 * self.eigenvalues, self.eigenvectors, self.solution)

    def describe(self) -> dict[str, Any]:
        info = {**super().describe(), "sigma_mix2": self.sigma_mix2}
        if self.solution is not None:
            info.update(
                solve_seconds=self.solution.seconds,
                solver_iterations=self.solution.iterations,
                duality_gap=self.solution.gap,
                kernel_variance=self.solution.cap,
                kernel_dimension=self.solution.kernel_dimension,
            )
        return info


#: Dense n x n float64 matrices a Whisper design holds at once: the dual's 6 (W, W^T W, its
#: eigenvectors, the basis, R and the secret's factor), then the certified accountant's about 16
#: (the agents' n x 2n factor, its QR, the right inverse, their magnitudes and the residual's
#: bound): what :func:`~dpdl.scale.require_dense` checks.
WHISPER_DENSE_MATRICES = 16


def dense_weights(weights: np.ndarray | sparse.sparray, what: str) -> np.ndarray:
    """`weights` as the dense array a dense design needs, after checking that the design's
    matrices fit in memory (a [`ConfigError`][dpdl.errors.ConfigError] naming n and the bytes,
    before anything is allocated, where they do not)."""
    require_dense(weights.shape[0], what, WHISPER_DENSE_MATRICES)
    return weights.toarray() if sparse.issparse(weights) else np.asarray(weights, dtype=float)


def design_whisper(
    weights: np.ndarray | sparse.sparray,
    calibration: Calibration,
    objective: np.ndarray | None = None,
) -> Whisper:
    """Whisper noise for `weights` meeting `calibration` against the eavesdropper (problem (9)),
    minimising `Tr(W R W^T)`, or `Tr(M R)` for `M = objective` (the horizon objective,
    [`dpdl.mechanisms.horizon`][dpdl.mechanisms.horizon]): the constraint, and so the privacy, is
    the same. The design is dense (an n x n covariance): a graph too large for it is refused
    first."""
    weights = dense_weights(weights, "Whisper's noise design (a dense n x n covariance)")
    bound = calibration.inverse_variance_bound
    solution = (
        solve_whisper(weights, bound) if objective is None else solve_weighted(objective, bound)
    )
    unit = Whisper.from_covariance(solution.covariance, solution)
    return unit.scaled(safe_scale(unit.scaled, Eavesdropper(), calibration, 1.0))


def disjoint_groups(n: int, m: int) -> list[tuple[int, ...]]:
    """`m` disjoint groups of consecutive agents covering `0..n-1` (CorN-DSGD Fig. 2)."""
    return [tuple(int(i) for i in part) for part in np.array_split(np.arange(n), m)]


class MultiSeedWhisper(NoiseMechanism):
    """Private `sigma_mix^2` noise plus one seed per group H_k generating `R_cor^(k)`."""

    name = "whisper-multiseed"

    def __init__(
        self,
        n: int,
        sigma_mix2: float,
        groups: Sequence[tuple[int, ...]],
        blocks: Sequence[np.ndarray],
        q: int,
    ) -> None:
        # The blocks are an SDP solver's, PSD to its tolerance (a block it left at zero had an
        # eigenvalue of -2e-11): those are zero; the accountant reads the R of the factors, as
        # drawn. Rounding is judged against R's largest variance, not the block's own.
        scale = sigma_mix2 + max((float(np.max(np.diag(b))) for b in blocks), default=0.0)
        secrets = [
            SharedSecret(
                tuple(group), psd_root(np.asarray(block, dtype=float), SOLVER_TOLERANCE, scale)
            )
            for group, block in zip(groups, blocks, strict=True)
        ]
        super().__init__(n, sigma_mix2, [s for s in secrets if s.factor.any()])
        self.sigma_mix2 = float(sigma_mix2)
        self.groups = [tuple(g) for g in groups]
        self.blocks = [np.asarray(b) for b in blocks]
        self.q = q
        self.default_threat: ThreatModel = Colluding(q) if q else Eavesdropper()

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "sigma_mix2": self.sigma_mix2,
            "groups": len(self.groups),
            "q": self.q,
        }
