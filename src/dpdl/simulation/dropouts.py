"""The engine's side of dropouts: each round's alive agents, their mixing and their noise design.

[`run_dsgd`][dpdl.simulation.dsgd.run_dsgd] asks
[`RoundDropouts`][dpdl.simulation.dropouts.RoundDropouts] at every round t which agents are alive
([`DropoutSchedule`][dpdl.jobspec.dropouts.DropoutSchedule]) and, in a round some agent misses,
for the round's mixing on the device
([`mixing_after_dropouts`][dpdl.jobspec.dropouts.mixing_after_dropouts], sparse where W is) and,
under seed recovery, the round's noise design
([`NoiseMechanism.after_dropouts`][dpdl.mechanisms.base.NoiseMechanism.after_dropouts]). Both depend
on the round's alive pattern only and are kept for the `CACHED_PATTERNS` patterns used last (a
file's schedule repeats a few patterns; a rate's on many agents rarely repeats one, and a dense
W' or a noise factor of thousands of agents is megabytes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

import numpy as np
import torch
from scipy import sparse

from dpdl.errors import ConfigError
from dpdl.jobspec.dropouts import DropoutSchedule, mixing_after_dropouts
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.simulation.tensors import mixing_operator

__all__ = ["CACHED_PATTERNS", "RoundDropouts"]

#: Alive patterns whose mixing and noise design are kept.
CACHED_PATTERNS = 64

_Value = TypeVar("_Value")


class _Recent(Generic[_Value]):
    """The values of the `CACHED_PATTERNS` keys used last."""

    def __init__(self) -> None:
        self._values: OrderedDict[bytes, _Value] = OrderedDict()

    def get_or_make(self, key: bytes, make: Callable[[], _Value]) -> _Value:
        if key in self._values:
            self._values.move_to_end(key)
            return self._values[key]
        value = self._values[key] = make()
        if len(self._values) > CACHED_PATTERNS:
            self._values.popitem(last=False)
        return value


class RoundDropouts:
    """The rounds of a run under `schedule`: who is alive, the mixing of `weights` among them
    on `device`, and `mechanism`'s design of the round (with `recovery`, the alive holders of a
    shared seed add the missing holders' share)."""

    def __init__(
        self,
        schedule: DropoutSchedule,
        weights: np.ndarray | sparse.sparray,
        mechanism: NoiseMechanism,
        recovery: bool,
        device: torch.device,
        steps: int,
    ) -> None:
        n = weights.shape[0]
        if schedule.n != n or schedule.steps < steps:
            raise ConfigError(
                f"the dropout schedule is of {schedule.n} agents over {schedule.steps} rounds; "
                f"this run has {n} agents and {steps} rounds"
            )
        self.schedule, self.weights, self.mechanism = schedule, weights, mechanism
        self.recovery, self.device = recovery, device
        self._mixing: _Recent[torch.Tensor] = _Recent()
        self._designs: _Recent[NoiseMechanism] = _Recent()

    def alive(self, t: int) -> np.ndarray | None:
        """The `(n,)` mask of the agents alive at round `t`, or None when all are (the round
        is then the plain one)."""
        alive = self.schedule.alive_at(t)
        return None if alive.all() else alive

    def mask(self, alive: np.ndarray) -> torch.Tensor:
        """`alive` as an `(n, 1)` boolean tensor on the device."""
        return torch.tensor(alive, device=self.device)[:, None]

    def mixing(self, alive: np.ndarray) -> torch.Tensor:
        """W' of a round with `alive` agents, on the device."""
        return self._mixing.get_or_make(
            alive.tobytes(),
            lambda: mixing_operator(mixing_after_dropouts(self.weights, alive), self.device),
        )

    def design(self, alive: np.ndarray) -> NoiseMechanism:
        """The noise design of a round with `alive` agents: under recovery the alive holders of
        each shared seed add the missing holders' share; without it the design as it is (a
        missing agent's part is not sent)."""
        if not self.recovery:
            return self.mechanism
        return self._designs.get_or_make(
            alive.tobytes(), lambda: self.mechanism.after_dropouts(alive, True)
        )
