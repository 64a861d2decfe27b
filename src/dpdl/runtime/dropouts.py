"""One agent's rounds under a dropout schedule: who is alive, what it mixes, what noise it adds.

Every agent builds the same [`DropoutSchedule`][dpdl.jobspec.dropouts.DropoutSchedule] from the
public configuration (a rate and the replicate's seed, or a schedule file; the agents compare it in
the handshake, through the design digest). The schedule stands for the liveness exchange a
deployment holds at the start of each round (every agent announces whether it takes part, and the
round proceeds among those that did): so every agent knows, before it computes, who is alive in
round t. An agent missing round t computes, sends and receives nothing and keeps its model (its
batch stream still advances, as in the simulation); an alive agent sends to its alive neighbours
only, waits for its alive neighbours only, and mixes what arrived with its row of
[`mixing_after_dropouts`][dpdl.jobspec.dropouts.mixing_after_dropouts]; under seed recovery it
draws its noise from the round's design
([`after_dropouts`][dpdl.mechanisms.base.NoiseMechanism.after_dropouts]), from the seeds it holds.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import sparse

from dpdl.jobspec.dropouts import DropoutSchedule, mixing_after_dropouts
from dpdl.mechanisms.base import NoiseMechanism

__all__ = ["AgentRound", "AgentRounds"]

#: A round's noise design, the agent's own weight and its weights of the senders it mixes.
AgentRound = tuple[NoiseMechanism, float, dict[int, float]]

#: Alive patterns whose round an agent keeps.
CACHED_PATTERNS = 64


class AgentRounds:
    """The rounds of agent `rank` (rank = agent: dropouts do not combine with departures) under
    `schedule`, on the graph of `weights` (it hears from `senders`), with `mechanism`'s noise and,
    with `recovery`, the alive holders of a shared seed adding the missing holders' share."""

    def __init__(
        self,
        schedule: DropoutSchedule,
        weights: np.ndarray | sparse.sparray,
        mechanism: NoiseMechanism,
        rank: int,
        senders: list[int],
        recovery: bool,
    ) -> None:
        self.schedule, self.weights, self.mechanism = schedule, weights, mechanism
        self.rank, self.senders, self.recovery = rank, senders, recovery
        self._round = functools.lru_cache(maxsize=CACHED_PATTERNS)(self._make_round)

    def alive(self, t: int) -> np.ndarray | None:
        """The mask of the agents alive at round `t` (the round's liveness exchange), or None
        when all are (the round is then the plain one)."""
        alive = self.schedule.alive_at(t)
        return None if alive.all() else alive

    def round(self, alive: np.ndarray) -> AgentRound:
        """The agent's round when `alive` agents take part (it among them)."""
        return self._round(alive.tobytes())

    def _make_round(self, pattern: bytes) -> AgentRound:
        alive = np.frombuffer(pattern, dtype=bool)
        row = mixing_after_dropouts(self.weights, alive)[[self.rank]]
        row = np.ravel(row.toarray() if sparse.issparse(row) else row)
        design = self.mechanism.after_dropouts(alive, True) if self.recovery else self.mechanism
        inputs = {j: float(row[j]) for j in self.senders if alive[j]}
        return design, float(row[self.rank]), inputs
