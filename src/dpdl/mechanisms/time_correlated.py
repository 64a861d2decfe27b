"""Noise correlated over time: MF-D-SGD with a local encoder (MAFALDA-SGD, Algorithm 1).

Agent u's noise at step t is `sum_{s <= t} (C_local^-1)[t, s] z_s^(u)` with `z ~ N(0, sigma^2)`
independent over steps, agents and coordinates: the noise `C^-1 Z` of eq. (5) for `C = C_local (x)
I_n`. No seed is shared, so the design is local (LDP); its privacy is the encoder's sensitivity
under the participation scheme ([`dpdl.factorization.mafalda`][dpdl.factorization.mafalda]), not a
per-step covariance, so it is a noise *source* for the engine and not a
[`NoiseMechanism`][dpdl.mechanisms.base.NoiseMechanism]: it has no per-round description
([`GaussianNoise`][dpdl.accounting.noise.GaussianNoise]) for the accountant to read. DP-D-SGD
(`C_local = I`) and AntiPGD (`C_local = 1_{t >= s}`) are the same source with other encoders;
MAFALDA-L-SGD gives each agent its own encoder (`C = sum_u C_u (x) e_u e_u^T`, an `n x T x T`
stack). The noise is drawn with the least state the encoder's structure allows: every seed for a
dense one, the last bands for a banded `C` or `C^-1`, `d` buffers for a buffered linear Toeplitz
`C` ([`dpdl.mechanisms.noise_streams`][dpdl.mechanisms.noise_streams]).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy import sparse
from scipy.linalg import solve_triangular

from dpdl.errors import ConfigError
from dpdl.mechanisms.noise_streams import plan, stream

__all__ = ["LocalCorrelatedNoise"]


class LocalCorrelatedNoise:
    """`C_local^-1 Z` for every agent, drawn step by step (lower-triangular `C_local`:
    causal)."""

    def __init__(
        self,
        n: int,
        encoder: np.ndarray,
        sigma: float,
        name: str = "mf-dsgd",
        sensitivity: float | None = None,
        *,
        decoder: np.ndarray | None = None,
        buffer: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        encoder = np.asarray(encoder, dtype=float)
        if not (
            (encoder.ndim == 2 or (encoder.ndim == 3 and encoder.shape[0] == n))
            and encoder.shape[-1] == encoder.shape[-2]
        ):
            raise ConfigError(
                "the local encoder must be a square T x T matrix, or one per agent "
                f"({n} x T x T), got shape {encoder.shape}"
            )
        if np.abs(np.triu(encoder, 1)).max(initial=0.0) > 0:
            raise ConfigError(
                "the local encoder must be lower triangular (noise may not depend on future steps)"
            )
        if (np.abs(np.diagonal(encoder, axis1=-2, axis2=-1)) == 0).any():
            raise ConfigError("the local encoder must be invertible (a zero on its diagonal)")
        if not (np.isfinite(sigma) and sigma >= 0):
            raise ConfigError(f"the noise multiplier must be a finite number >= 0, got {sigma}")
        self.n = n
        self.encoder = encoder
        self.sigma = float(sigma)
        self.name = name
        #: The encoder's sensitivity under the run's participation, where the builder computed it
        #: (:mod:`dpdl.jobspec.factorized`), for the record: the noise was calibrated to it.
        self.sensitivity = sensitivity
        #: ``C_local^-1`` (one per agent for a stack), lower triangular: row t weighs the seeds of
        #: steps 0..t.
        identity = np.eye(encoder.shape[-1])
        self.decoder = (
            _checked_inverse(encoder, np.asarray(decoder, dtype=float))
            if decoder is not None
            else solve_triangular(encoder, identity, lower=True)
            if encoder.ndim == 2
            else np.stack([solve_triangular(e, identity, lower=True) for e in encoder])
        )
        #: A buffered linear Toeplitz encoder's `(theta, omega)`, where it is one.
        self.buffer = None if buffer is None else _checked_buffer(encoder, buffer)
        #: How the noise is drawn, and the floats it keeps per agent and coordinate between steps
        #: ([`plan`][dpdl.mechanisms.noise_streams.plan]).
        self.stream_kind, self.memory_per_step = plan(self.encoder, self.decoder, self.buffer)

    @property
    def steps(self) -> int:
        return self.encoder.shape[-1]

    @property
    def is_noiseless(self) -> bool:
        return self.sigma == 0.0

    @property
    def calibrated(self) -> bool:
        """Whether the noise was sized for a budget: any but none (`sigma = 0`)."""
        return not self.is_noiseless

    def noise_stream(self, rng: np.random.Generator, dim: int) -> Iterator[np.ndarray]:
        """Step t's noise `(n, dim)`, keeping `memory_per_step` floats per agent and coordinate
        (`stream_kind`: every seed for a dense encoder, the last bands' seeds or outputs for a
        banded `C^-1` or `C`, the buffer of a BLT;
        [`stream`][dpdl.mechanisms.noise_streams.stream])."""
        return stream(
            self.stream_kind, self.encoder, self.decoder, self.buffer, self.sigma, self.n, rng, dim
        )

    def variance_after_mixing(self, weights: np.ndarray) -> float:
        """`Tr(W R_t W^T)` of step t's noise, averaged over the steps: agent u's noise has
        variance `sigma^2 ||row t of its decoder||^2` per coordinate, independent of the others'.
        (One step's variance only: what MAFALDA-SGD buys is the cancellation over steps, which
        no per-step number shows.)"""
        squared = weights.multiply(weights) if sparse.issparse(weights) else np.square(weights)
        columns = np.asarray(squared.sum(axis=0)).ravel()  # ||W e_u||^2 for every agent u
        rows = np.sum(self.decoder**2, axis=-1)  # (T,) or (n, T)
        per_agent = rows.mean(axis=-1) * np.ones(self.n)
        return float(self.sigma**2 * np.dot(per_agent, columns))

    def describe(self) -> dict[str, Any]:
        return {
            "mechanism": self.name,
            "n": self.n,
            "steps": self.steps,
            "sigma": self.sigma,
            "shared_secrets": 0,
            "noise_stream": self.stream_kind,
            "memory_per_step": self.memory_per_step,
            **({} if self.sensitivity is None else {"sensitivity": self.sensitivity}),
        }


#: How far a given decoder's product with the encoder may be from the identity (relative).
INVERSE_TOLERANCE = 1e-8


def _checked_inverse(encoder: np.ndarray, decoder: np.ndarray) -> np.ndarray:
    """`decoder`, checked to be the encoder's inverse (to `INVERSE_TOLERANCE`) and lower
    triangular."""
    if decoder.shape != encoder.shape or np.abs(np.triu(decoder, 1)).max(initial=0.0) > 0:
        raise ConfigError(
            f"the decoder must be a lower-triangular {encoder.shape} matrix, the encoder's "
            f"inverse; got shape {decoder.shape}"
        )
    identity = np.eye(encoder.shape[-1])
    scale = np.abs(encoder).max() * np.abs(decoder).max() * encoder.shape[-1]
    if np.abs(encoder @ decoder - identity).max() > INVERSE_TOLERANCE * max(scale, 1.0):
        raise ConfigError("the decoder given is not the encoder's inverse")
    return decoder


def _checked_buffer(
    encoder: np.ndarray, buffer: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """`(theta, omega)`, checked to give the encoder: `c_0 = 1`, `c_k = sum_i omega_i
    theta_i^(k-1)` (a buffered linear Toeplitz matrix)."""
    theta, omega = (np.asarray(a, dtype=float).ravel() for a in buffer)
    steps = encoder.shape[-1]
    if encoder.ndim != 2 or theta.shape != omega.shape or not theta.size:
        raise ConfigError(
            "a buffer is (theta, omega) of one size d >= 1 for one T x T encoder, got "
            f"{theta.shape}, {omega.shape} for {encoder.shape}"
        )
    powers = theta[None, :] ** np.arange(max(steps - 1, 0))[:, None]
    coefficients = np.concatenate([[1.0], powers @ omega])
    lag = np.subtract.outer(np.arange(steps), np.arange(steps))
    toeplitz = np.where(lag >= 0, coefficients[np.clip(lag, 0, steps - 1)], 0.0)
    if np.abs(toeplitz - encoder).max() > INVERSE_TOLERANCE * max(np.abs(encoder).max(), 1.0):
        raise ConfigError("the buffer (theta, omega) given does not give the encoder")
    return theta, omega
