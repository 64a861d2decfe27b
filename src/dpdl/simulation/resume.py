"""Where a simulated run stands, to stop it and continue it later with the same numbers.

[`iterate`][dpdl.simulation.dsgd.iterate] hands an
[`EngineState`][dpdl.simulation.resume.EngineState] to
[`Checkpoints.save`][dpdl.simulation.resume.Checkpoints] every `every` steps (and at the last one),
and continues from `Checkpoints.start` when it is given: a resumed run's parameters, metric
history and final metrics equal an uninterrupted run's, bit for bit. Files are the experiments'
business ([`dpdl.experiments.checkpoints`][dpdl.experiments.checkpoints]); this module is the
engine's side.

How the random streams are restored: by fast-forwarding. The state holds the parameters, the
engine's other variables (gradient tracking's tracking variable and last gradient), the step, the
history and torch's generator, but no state of the batch sampler or of the noise stream: on resume
the engine draws steps 1..t's batches and noise again, in order, without computing a gradient, and
throws them away. That is exact by construction for every stream the engine has (a sampler with a
state of its own such as the cyclic one, the agent-by-agent streams of `agent_seeds`, a mechanism
of a plugin that overrides `noise_stream`, and the time-correlated noise, whose stream keeps up to
every seed drawn so far: `T n d` floats for a dense encoder such as MAFALDA's, that a checkpoint
would otherwise have to hold), with no per-stream code to keep in step with the streams. It costs
the host's draws of the steps done (measured in docs/cli.md, "Checkpoints and resuming").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Checkpoints", "EngineState"]


@dataclass
class EngineState:
    """A run after step `step`: every agent's parameters `(n, d)`, the engine's other variables
    (by name, each `(n, d)`), the metric records so far (`history`; the last-iterates records of
    `average_last` in `tail`) and torch's CPU generator state (`torch_rng`, bytes as `uint8`)."""

    step: int
    params: np.ndarray
    history: list[dict[str, float]]
    tail: list[dict[str, float]] = field(default_factory=list)
    variables: dict[str, np.ndarray] = field(default_factory=dict)
    torch_rng: np.ndarray | None = None


@dataclass
class Checkpoints:
    """How [`iterate`][dpdl.simulation.dsgd.iterate] checkpoints a run: `save(state)` after every
    `every`-th step (0: only after the last), skipped while fewer than `min_seconds` have passed
    since the last save (the last step is always saved); `start`: the state to continue from
    (None: from step 0)."""

    save: Callable[[EngineState], None]
    every: int = 0
    min_seconds: float = 0.0
    start: EngineState | None = None
    _last: float = field(default_factory=time.monotonic, repr=False)

    def due(self, step: int, steps: int) -> bool:
        """Whether step `step` of `steps` is saved."""
        if step == steps:
            return True
        if not self.every or step % self.every:
            return False
        return time.monotonic() - self._last >= self.min_seconds

    def saved(self) -> None:
        """Note that a state was saved now."""
        self._last = time.monotonic()
