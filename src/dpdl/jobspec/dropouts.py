"""Agents that miss rounds: the dropout schedule, and the mixing that what arrived allows.

A dropout is an agent that misses one round entirely (a crash, a slow link, a phone asleep):
it computes nothing and sends nothing that round, and comes back at the next round it is alive.
Which agents miss which rounds is a [`DropoutSchedule`][dpdl.jobspec.dropouts.DropoutSchedule],
a `(T, n)` boolean table of who is alive at each round, either drawn from the run seed (each
agent misses each round independently with probability `rate`, from its own stream:
deterministic, and the same in the simulation and in `dpdl.runtime`) or read from a CSV file of
`round,agent` rows (rounds 1..T).

What a round becomes when agents are missing
([`mixing_after_dropouts`][dpdl.jobspec.dropouts.mixing_after_dropouts]): every alive agent i
mixes what arrived, `W_ij` for every alive j, and gives the weights of the missing neighbours
to its own model, `W'_ii = W_ii + sum_{j missing} W_ij`; a missing agent keeps its model
(`W'_jj = 1`). W' is symmetric when W is, so it stays doubly stochastic: the network average
is still preserved by the gossip, and only the noise that no longer cancels moves it.

The schedule is public and independent of the data (the adversary may know it): the
accountant conditions on it ([`dpdl.accounting.dropouts`][dpdl.accounting.dropouts]).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from dpdl.accounting.dropouts import draw_alive
from dpdl.errors import ConfigError

__all__ = ["DropoutSchedule", "mixing_after_dropouts"]

#: The header a schedule file starts with.
SCHEDULE_COLUMNS = ("round", "agent")


@dataclass(frozen=True, eq=False)
class DropoutSchedule:
    """Who is alive at each round: `alive[t - 1, i]` is False when agent i misses round t.

    `source` says where the table came from (a rate and seed, or a file), for the run's
    config and results."""

    alive: np.ndarray
    source: str

    def __post_init__(self) -> None:
        alive = np.asarray(self.alive)
        if alive.ndim != 2 or alive.dtype != bool:
            raise ConfigError(
                f"a dropout schedule is a (rounds, agents) boolean table, got {alive}"
            )
        alive = alive.copy()
        alive.flags.writeable = False
        object.__setattr__(self, "alive", alive)

    @classmethod
    def none(cls, n: int, steps: int) -> DropoutSchedule:
        """Every agent alive at every round."""
        return cls(np.ones((steps, n), dtype=bool), "none")

    @classmethod
    def from_rate(cls, rate: float, n: int, steps: int, seed: int) -> DropoutSchedule:
        """Each agent misses each round independently with probability `rate`, drawn from the
        run seed's `dropouts` stream (one uniform per round and agent, in round-major order:
        [`draw_alive`][dpdl.accounting.dropouts.draw_alive], which the accountant's drawn
        schedules share)."""
        if not 0.0 <= rate < 1.0:
            raise ConfigError(f"--dropout is a probability in [0, 1), got {rate}")
        return cls(draw_alive(rate, n, steps, seed), f"rate {rate:g}, seed {seed}")

    @classmethod
    def from_file(cls, path: Path, n: int, steps: int) -> DropoutSchedule:
        """The rounds each agent misses, from a CSV file with header `round,agent` and one row
        per missed round (rounds 1..steps, agents 0..n-1, no row twice)."""
        alive = np.ones((steps, n), dtype=bool)
        try:
            with Path(path).open(newline="") as handle:
                reader = csv.reader(handle)
                header = next(reader, None)
                if header is None or tuple(cell.strip() for cell in header) != SCHEDULE_COLUMNS:
                    raise ConfigError(
                        f"dropout schedule {path}: the first line must be 'round,agent', got "
                        f"{header!r}"
                    )
                for line, row in enumerate(reader, start=2):
                    t, agent = _schedule_row(path, line, row, n, steps)
                    if not alive[t - 1, agent]:
                        raise ConfigError(
                            f"dropout schedule {path}, line {line}: agent {agent} misses round {t} "
                            "twice"
                        )
                    alive[t - 1, agent] = False
        except OSError as error:
            raise ConfigError(f"cannot read the dropout schedule {path}: {error}") from error
        return cls(alive, f"file {Path(path).name}")

    @property
    def n(self) -> int:
        return self.alive.shape[1]

    @property
    def steps(self) -> int:
        return self.alive.shape[0]

    def alive_at(self, step: int) -> np.ndarray:
        """`(n,)` mask of the agents alive at round `step` (1-based)."""
        return self.alive[step - 1]

    @property
    def missed(self) -> int:
        """Rounds missed, summed over agents."""
        return int((~self.alive).sum())

    @property
    def is_empty(self) -> bool:
        """True when no agent misses any round."""
        return bool(self.alive.all())

    def write(self, path: Path) -> None:
        """Write the schedule as the CSV file that
        [`from_file`][dpdl.jobspec.dropouts.DropoutSchedule.from_file] reads back: the replay of
        a run's dropouts."""
        rounds, agents = np.nonzero(~self.alive)
        with Path(path).open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(SCHEDULE_COLUMNS)
            writer.writerows(zip((rounds + 1).tolist(), agents.tolist(), strict=True))

    def summary(self) -> str:
        """One line for a person: where the schedule came from and how much was missed."""
        fraction = self.missed / self.alive.size
        return f"dropouts ({self.source}): {self.missed} agent-rounds missed, {fraction:.1%}"

    def describe(self) -> dict[str, Any]:
        """What the run's results record about its dropouts."""
        return {
            "dropouts": self.source,
            "missed_rounds": self.missed,
            "missed_fraction": self.missed / self.alive.size,
        }


def _schedule_row(path: Path, line: int, row: list[str], n: int, steps: int) -> tuple[int, int]:
    if len(row) != 2:
        raise ConfigError(
            f"dropout schedule {path}, line {line}: expected 'round,agent', got {row}"
        )
    try:
        t, agent = int(row[0]), int(row[1])
    except ValueError:
        raise ConfigError(
            f"dropout schedule {path}, line {line}: round and agent must be integers, got {row}"
        ) from None
    if not 1 <= t <= steps:
        raise ConfigError(f"dropout schedule {path}, line {line}: round {t} is not in 1..{steps}")
    if not 0 <= agent < n:
        raise ConfigError(
            f"dropout schedule {path}, line {line}: agent {agent} is not in 0..{n - 1}"
        )
    return t, agent


def mixing_after_dropouts(
    weights: np.ndarray | sparse.sparray | sparse.spmatrix, alive: np.ndarray
) -> np.ndarray | sparse.csr_array:
    """The mixing of a round in which only the `alive` agents send (module doc): each alive agent
    keeps the weights of the neighbours that sent and gives those of the missing ones to its own
    model, `W'_ii = W_ii + sum_{j missing} W_ij`; a missing agent keeps its model. Sparse stays
    sparse (`csr_array`)."""
    alive = np.asarray(alive, dtype=bool)
    if alive.shape != (weights.shape[0],):
        raise ConfigError(
            f"the alive mask has shape {alive.shape}, the mixing matrix {weights.shape}"
        )
    if alive.all():
        return weights
    if sparse.issparse(weights):
        weights = sparse.csr_array(weights, dtype=float)
        missing = sparse.diags_array((~alive).astype(float))
        own = np.where(alive, weights.diagonal() + (weights @ missing).sum(axis=1), 1.0)
        kept = sparse.diags_array(alive.astype(float))
        mixed = (kept @ weights @ kept).tolil()
        mixed.setdiag(own)
        return sparse.csr_array(mixed)
    weights = np.asarray(weights, dtype=float)
    own = np.where(alive, np.diag(weights) + weights[:, ~alive].sum(axis=1), 1.0)
    mixed = weights * (alive[:, None] & alive[None, :])
    mixed[np.diag_indices_from(mixed)] = own
    return mixed
