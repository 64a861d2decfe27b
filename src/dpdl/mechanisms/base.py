"""Noise mechanisms: Gaussian noise `v_t ~ N(0, R)` per coordinate, built from seeds.

Every design in the papers is a sum of independent parts, each generated from one seed:

- a *private* part per agent, `N(0, private_variances[i])`, from a seed only agent i holds
  (LDP noise; DECOR's `u_i`; Whisper's `sigma_mix^2 I`);
- *shared secrets*: a seed known to a set of agents (its holders), from which each holder computes
  its row of `F z` with `z ~ N(0, I_r)`, contributing `F F^T` on holders x holders (DECOR's
  pairwise-cancelling `v_ij = -v_ji`: holders {i, j}, `F = sigma_cor (1, -1)^T`; Whisper's
  `R_cor^1/2 s` from a seed shared by all; CorN-DSGD's group seeds `(R_cor^(k), s_k)`).

So `R = diag(private) + sum_k F_k F_k^T`. That structure is plain data, a
[`GaussianNoise`][dpdl.accounting.noise.GaussianNoise] (`NoiseMechanism.noise`): it says which part
of R a coalition of agents cannot see (CorN-DSGD Section V-D, DECOR Theorem 6), and the accountant
reads it without importing any mechanism. A mechanism adds how each agent samples its own noise from
the seeds it holds
([`NoiseMechanism.agent_noise`][dpdl.mechanisms.base.NoiseMechanism.agent_noise]), its name, its
default threat, and how it is designed for a budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse

from dpdl.accounting.calibration import Calibration
from dpdl.accounting.noise import GaussianNoise, NoiseSource, SharedSecret, noise_of
from dpdl.seeding import purpose_seed
from dpdl.threats import Eavesdropper, ThreatModel

__all__ = ["NoiseMechanism", "SeedBook", "SharedSecret"]


@dataclass(frozen=True)
class SeedBook:
    """Seeds of one run: agent i's private seed and secret k's seed, derived from the run seed.

    An agent is handed only the entries it holds
    ([`for_agent`][dpdl.mechanisms.base.SeedBook.for_agent]); the noise of step t comes from
    `SeedSequence(seed, spawn_key=(..., t))`, so it is the same wherever it is computed.
    """

    #: The run seed the book was derived from (-1 for seeds an agent agreed by key exchange).
    seed: int
    private: Mapping[int, np.random.SeedSequence] = field(default_factory=dict)
    secrets: Mapping[int, np.random.SeedSequence] = field(default_factory=dict)

    @classmethod
    def for_run(cls, seed: int, n: int, n_secrets: int) -> SeedBook:
        return cls(
            seed,
            {i: purpose_seed(seed, f"private noise/{i}") for i in range(n)},
            {k: purpose_seed(seed, f"secret noise/{k}") for k in range(n_secrets)},
        )

    def for_agent(self, noise: GaussianNoise | NoiseSource, agent: int) -> SeedBook:
        """The part of the book agent `agent` holds: its private seed and the seeds of the
        secrets it holds in `noise` (a noise description, or a mechanism holding one)."""
        return SeedBook(
            self.seed,
            {agent: self.private[agent]},
            {k: self.secrets[k] for k in noise_of(noise).secrets_of(agent)},
        )

    @staticmethod
    def generator(seed: np.random.SeedSequence, step: int) -> np.random.Generator:
        """The generator of `seed`'s draws at `step`."""
        return np.random.default_rng(
            np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, step))
        )

    @staticmethod
    def draw(seed: np.random.SeedSequence, step: int, shape: tuple[int, ...]) -> np.ndarray:
        """Standard normal draws of `seed` at `step`."""
        return SeedBook.generator(seed, step).standard_normal(shape)


class NoiseMechanism:
    """Gaussian noise across n agents: private variances plus shared secrets (see module doc)."""

    #: Short name used by the CLI and in results.
    name: str = ""
    #: The adversary the design is calibrated against; the accountant reports against it first.
    default_threat: ThreatModel = Eavesdropper()
    #: Whether the design's scale comes from the accountant (its guarantee then equals the budget);
    #: False for baselines sized otherwise, such as zero-sum noise (matched to LDP's variance).
    calibrated: bool = True
    #: The budget the noise was sized for (steps, clip, sampling), set by
    #: :func:`~dpdl.mechanisms.registry.build_mechanism`; a run that would spend more than it (more
    #: steps, another clip) is refused (:func:`dpdl.jobspec.engine.require_calibrated_for`). None:
    #: noise built by hand, only accounted.
    calibration: Calibration | None = None

    def __init__(
        self, n: int, private_variances: np.ndarray | float, secrets: Sequence[SharedSecret] = ()
    ) -> None:
        #: The per-round noise as plain data: what the accountant reads
        #: (:mod:`dpdl.accounting.noise`).
        self.noise = GaussianNoise(n, np.asarray(private_variances, dtype=float), tuple(secrets))

    @property
    def n(self) -> int:
        return self.noise.n

    @property
    def private_variances(self) -> np.ndarray:
        return self.noise.private_variances

    @property
    def secrets(self) -> tuple[SharedSecret, ...]:
        return self.noise.secrets

    @property
    def generator(self) -> np.ndarray | sparse.csr_matrix:
        """(n, total width) generator of all shared noise: the shared part of v is `G z`."""
        return self.noise.generator

    # -- covariance ---------------------------------------------------------------------------

    def covariance(self) -> np.ndarray:
        """Per-coordinate covariance R (n x n) of one step's noise across agents."""
        return self.noise.covariance()

    def unknown_covariance(self, coalition: Iterable[int] = ()) -> np.ndarray:
        """Covariance of the noise a coalition cannot reconstruct
        ([`GaussianNoise.unknown_covariance`][dpdl.accounting.noise.GaussianNoise.unknown_covariance])."""
        return self.noise.unknown_covariance(coalition)

    def unknown_to(self, coalition: Iterable[int]) -> NoiseMechanism:
        """The noise a coalition cannot subtract, as a mechanism of its own: the private parts of
        non-members and the secrets none of its members holds (its covariance is
        [`unknown_covariance`][dpdl.mechanisms.base.NoiseMechanism.unknown_covariance]); what an
        attacking coalition's membership test faces."""
        unknown = self.noise.unknown_to(coalition)
        if unknown is self.noise:
            return self
        return NoiseMechanism(self.n, unknown.private_variances, unknown.secrets)

    def secrets_of(self, agent: int) -> list[int]:
        """Indices of the secrets whose seed `agent` holds."""
        return self.noise.secrets_of(agent)

    def variance_after_mixing(self, weights: np.ndarray) -> float:
        """`Tr(W R W^T)`: noise variance one gossip round leaves, per coordinate, summed over
        agents (the privacy term of CorN-DSGD Theorem 1, eq. (6))."""
        return self.noise.variance_after_mixing(weights)

    @property
    def is_noiseless(self) -> bool:
        """True when the mechanism adds no noise at all (the engine then skips sampling)."""
        return not self.private_variances.any() and self.generator.shape[1] == 0

    # -- sampling -----------------------------------------------------------------------------

    def sample(self, rng: np.random.Generator, dim: int) -> np.ndarray:
        """One step's noise for all agents, `(n, dim)`, from one generator: the simulation's
        path, with the same distribution N(0, R) per coordinate as the agents' own seed-based
        sampling ([`agent_noise`][dpdl.mechanisms.base.NoiseMechanism.agent_noise]) but fewer
        normal draws where a square root of R is cheaper
        ([`sampling_factor`][dpdl.accounting.noise.GaussianNoise.sampling_factor], which the
        accountant certifies as it certifies the agents' factor)."""
        factor = self.noise.sampling_factor
        if factor is not None:
            return factor @ rng.standard_normal((factor.shape[1], dim))
        noise = np.sqrt(self.private_variances)[:, None] * rng.standard_normal((self.n, dim))
        if self.generator.shape[1]:
            noise += self.generator @ rng.standard_normal((self.generator.shape[1], dim))
        return noise

    def noise_stream(self, rng: np.random.Generator, dim: int) -> Iterator[np.ndarray]:
        """Every step's noise in turn (the engine's path). Per-step designs draw independent
        steps with [`sample`][dpdl.mechanisms.base.NoiseMechanism.sample]; noise correlated over
        time overrides this."""
        while True:
            yield self.sample(rng, dim)

    def agent_noise(self, agent: int, seeds: SeedBook, step: int, dim: int) -> np.ndarray:
        """Agent `agent`'s noise at `step` computed from the seeds in `seeds` only.

        Needs the agent's private seed and the seed of every secret it holds; a seed it does not
        hold is never read (a `KeyError` would say so).
        """
        noise = np.sqrt(self.private_variances[agent]) * SeedBook.draw(
            seeds.private[agent], step, (dim,)
        )
        for k in self.secrets_of(agent):
            secret = self.secrets[k]
            row = secret.holders.index(agent)
            noise += secret.factor[row] @ SeedBook.draw(
                seeds.secrets[k], step, (secret.factor.shape[1], dim)
            )
        return noise

    def after_dropouts(self, alive: np.ndarray, recovery: bool = False) -> NoiseMechanism:
        """The mechanism of a round in which only the `alive` agents send
        ([`GaussianNoise.after_dropouts`][dpdl.accounting.noise.GaussianNoise.after_dropouts]):
        the same secrets in the same order, so an agent draws its round's noise from the same
        seeds ([`agent_noise`][dpdl.mechanisms.base.NoiseMechanism.agent_noise]); with
        `recovery`, the alive holders of a secret add the missing holders' share."""
        noise = self.noise.after_dropouts(alive, recovery)
        if noise is self.noise:
            return self
        other = NoiseMechanism(self.n, noise.private_variances, noise.secrets)
        other.name, other.default_threat = self.name, self.default_threat
        other.calibration = self.calibration
        return other

    def scaled(self, factor: float) -> NoiseMechanism:
        """The same design with every noise standard deviation multiplied by `factor`."""
        noise = self.noise.scaled(factor)
        other = NoiseMechanism(self.n, noise.private_variances, noise.secrets)
        other.name, other.default_threat = self.name, self.default_threat
        return other

    def describe(self) -> dict[str, Any]:
        """Parameters for the run's config file."""
        return {
            "mechanism": self.name,
            "n": self.n,
            "threat": str(self.default_threat),
            "private_variance_min": float(self.private_variances.min()),
            "shared_secrets": len(self.secrets),
        }
