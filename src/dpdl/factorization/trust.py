"""Trust models and the attacker knowledge they give (MAFALDA-SGD, Definition 5, Lemma 14, App. A).

- [`LDP`][dpdl.factorization.trust.LDP]: every message is public; the attacker knows no seed and no
  gradient.
- [`SecLDP`][dpdl.factorization.trust.SecLDP]: every message is public and the attacking agents pool
  their gradients and the seeds they hold (secret-based LDP, Allouah et al. 2024; DECOR's
  adversaries with q colluders).
- [`PNDP`][dpdl.factorization.trust.PNDP]: the attacking agents see only the messages sent to them,
  plus their own gradients and seeds (pairwise network DP, Cyffers & Bellet 2022).
- [`Links`][dpdl.factorization.trust.Links]: an eavesdropper on some directed links sees the
  messages sent on them and knows no seed and no gradient (LDP restricted to those links).

[`attacker_knowledge`][dpdl.factorization.trust.attacker_knowledge] stacks the observed messages,
the known gradients and the known seeds, then removes the known gradients (Lemma 14: `A <- A (I -
K^+ K)`, here zeroing the attackers' gradient columns) and drops the rows that became empty, giving
`O = A G + B Z`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dpdl.errors import ConfigError
from dpdl.factorization.algorithms import LinearAlgorithm

__all__ = ["LDP", "PNDP", "Knowledge", "Links", "SecLDP", "TrustModel", "attacker_knowledge"]

#: Relative tolerance of the check ``A = B C``.
FACTORIZATION_TOL = 1e-8


@dataclass(frozen=True)
class TrustModel:
    """The attacking agents and whether they observe every message or only those sent to them."""

    attackers: tuple[int, ...] = ()
    all_messages: bool = True

    @property
    def name(self) -> str:
        return type(self).__name__

    def __str__(self) -> str:
        who = f" attackers {list(self.attackers)}" if self.attackers else ""
        return f"{self.name}{who}"

    def observed(self, algorithm: LinearAlgorithm) -> np.ndarray:
        """`(messages,)` boolean: the messages of `algorithm` this attacker sees (every one, or
        those sent to an attacker by someone else)."""
        if self.all_messages:
            return np.ones(algorithm.gradients.shape[0], dtype=bool)
        attackers = np.zeros(algorithm.n, dtype=bool)
        attackers[list(self.attackers)] = True
        return algorithm.receivers[:, attackers].any(axis=1) & ~attackers[algorithm.senders]


@dataclass(frozen=True)
class LDP(TrustModel):
    """Local DP: all messages public, nothing else known."""

    def __post_init__(self) -> None:
        if self.attackers or not self.all_messages:
            raise ConfigError("LDP has no attacking agents and sees every message")


@dataclass(frozen=True)
class SecLDP(TrustModel):
    """Secret-based LDP: all messages public; the attackers' gradients and seeds are known."""

    def __post_init__(self) -> None:
        if not self.all_messages:
            raise ConfigError(
                "SecLDP sees every message; use PNDP for an attacker that sees only its own"
            )


@dataclass(frozen=True)
class PNDP(TrustModel):
    """Pairwise network DP: the attackers see the messages they receive, their gradients and
    seeds."""

    all_messages: bool = False

    def __post_init__(self) -> None:
        if not self.attackers or self.all_messages:
            raise ConfigError(
                "PNDP needs at least one attacking agent, which sees only the messages sent to it"
            )


@dataclass(frozen=True)
class Links(TrustModel):
    """An eavesdropper on the directed links `edges` (`(sender, receiver)` pairs): it sees every
    message sent on one of them, and knows no seed and no gradient."""

    edges: tuple[tuple[int, int], ...] = ()
    all_messages: bool = False

    def __post_init__(self) -> None:
        if self.attackers or self.all_messages or not self.edges:
            raise ConfigError(
                "Links needs at least one observed link (sender, receiver) and no attacking agent"
            )

    def __str__(self) -> str:
        return f"Links {' '.join(f'{s}->{r}' for s, r in self.edges)}"

    def observed(self, algorithm: LinearAlgorithm) -> np.ndarray:
        """The messages sent on one of the links; a link on which no message ever goes (not an
        edge of the graph) is an error naming it."""
        seen = np.zeros(algorithm.gradients.shape[0], dtype=bool)
        for sender, receiver in self.edges:
            if not (0 <= sender < algorithm.n and 0 <= receiver < algorithm.n):
                raise ConfigError(
                    f"link {sender}->{receiver}: agents must be in 0..{algorithm.n - 1}"
                )
            on_link = (algorithm.senders == sender) & algorithm.receivers[:, receiver]
            if sender == receiver or not on_link.any():
                raise ConfigError(
                    f"link {sender}->{receiver} is not an edge of the graph: no message is sent "
                    "on it"
                )
            seen |= on_link
        return seen


@dataclass(frozen=True)
class Knowledge:
    """What an attacker learns, `O = A G + B Z` after Lemma 14, and an encoder with `A = B C`.

    `protected` marks the agents the guarantee is about (all but the attackers).
    `structured` is the algorithm's own encoder restricted to what the attacker does not know
    (zero rows for known seeds, zero columns for known gradients), a candidate for C.
    """

    workload: np.ndarray  # A
    decoder: np.ndarray  # B
    protected: np.ndarray
    n: int
    steps: int
    description: str
    structured: np.ndarray | None = None

    @cached_property
    def encoder(self) -> np.ndarray | None:
        """C with `A = B C` (Theorem 6): the structured candidate when it factorizes, otherwise
        the minimum-norm `B^+ A` when that does, otherwise None: then some protected agent's
        gradient is not hidden by noise the attacker cannot remove (infinite sensitivity)."""
        scale = max(float(np.abs(self.workload).max(initial=0.0)), 1.0)
        candidates = [] if self.structured is None else [self.structured]
        candidates.append(np.linalg.lstsq(self.decoder, self.workload, rcond=None)[0])
        for encoder in candidates:
            if np.abs(self.decoder @ encoder - self.workload).max() <= FACTORIZATION_TOL * scale:
                return encoder
        return None


def attacker_knowledge(algorithm: LinearAlgorithm, trust: TrustModel) -> Knowledge:
    """`(A, B, C)` of `trust` on `algorithm` (Theorem 6): the observed messages, then the
    known seeds as rows `e_j` of B, with the attackers' gradients removed from A (Lemma 14)."""
    n = algorithm.n
    attackers = np.zeros(n, dtype=bool)
    if any(not 0 <= a < n for a in trust.attackers):
        raise ConfigError(f"attacking agents must be in 0..{n - 1}, got {list(trust.attackers)}")
    attackers[list(trust.attackers)] = True
    observed = trust.observed(algorithm)
    known_seeds = algorithm.holders[:, attackers].any(axis=1)
    honest_columns = ~attackers[algorithm.agent_of_row()]
    workload = algorithm.gradients[observed] * honest_columns[None, :]
    seeds = np.zeros((int(known_seeds.sum()), algorithm.noise.shape[1]))
    seeds[np.arange(len(seeds)), np.flatnonzero(known_seeds)] = 1.0
    decoder = np.vstack([algorithm.noise[observed], seeds])
    workload = np.vstack([workload, np.zeros((seeds.shape[0], workload.shape[1]))])
    structured = None
    if algorithm.encoder is not None:
        structured = algorithm.encoder * honest_columns[None, :]
        structured[known_seeds] = 0.0
    return Knowledge(
        workload,
        decoder,
        ~attackers,
        n,
        algorithm.steps,
        f"{algorithm.name} under {trust}",
        structured,
    )
