"""Runs that fail loudly: a watch on an engine's state that stops a run whose models, gradients,
noise or metrics stop being finite, with a [`DivergenceError`][dpdl.errors.DivergenceError] naming
the step, the agent and the likely cause.

The watch is cheap: what an engine notes each step (the simulation's D-SGD: each agent's
noise-added message, which holds its gradient after clipping and its noise times the step size;
gradient tracking: the models and tracking variables) is reduced to one number per agent, its
largest magnitude (`(n,)`, on the compute device, no copy to the host; NaN where a value is NaN),
and these are checked together at the run's evaluations, before a checkpoint and at least every
`WINDOW` steps (one synchronisation), so a GPU is never waited on step by step. The first step and
agent whose largest magnitude is not finite are reported, with the likely cause: a step size too
large where the values grew past `HUGE` first, are infinite or the step size is huge; else a loss
or gradient that is NaN (the runtime's agents, which check their own values every round, tell the
gradient, the noise and the message apart).
The simulation ([`dpdl.simulation.dsgd.iterate`][dpdl.simulation.dsgd.iterate]) and the runtime's
agents ([`dpdl.runtime.agent`][dpdl.runtime.agent]) both watch their runs with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

from dpdl.errors import DivergenceError

__all__ = ["HUGE", "WINDOW", "FiniteWatch", "check_metrics", "divergence"]

#: At most this many steps' values are kept before they are checked.
WINDOW = 64

#: What each watched quantity is called in a message, and where in the step it is.
_WHAT = {
    "model": "model",
    "gradient": "gradient after clipping",
    "noise": "noise",
    "message": "noise-added message",
    "tracking": "tracking variable",
}


#: A model larger than this before a gradient that is not finite: the models grew without bound.
HUGE = 1e30


def _cause(what: str, kind: str, step_size: float, peak: float | None) -> str:
    """The likely cause of a non-finite `what` (`nan` or `inf`) under step size `step_size`, the
    agent's model (or message) having had largest magnitude `peak` before (None: not known)."""
    grew = peak is not None and peak > HUGE
    large = kind == "inf" or not math.isfinite(step_size) or abs(step_size) > 1e3
    if grew or (large and what not in ("gradient", "noise")):
        before = f"the models grew to {peak:.3g} before it: " if grew else ""
        return f"{before}the step size {step_size:g} may be too large"
    if what == "noise":
        return "the mechanism drew noise that is not finite (its noise scale may be too large)"
    return (
        f"the loss or its gradient is {kind} there (a loss that returns NaN or inf, or data that "
        "is not finite)"
        + ("" if what == "gradient" else f", or the step size {step_size:g} is too large")
    )


class FiniteWatch:
    """Per-agent largest magnitudes of what an engine computes, checked in windows (module doc).

    `step_size(t)`: the step size of step `t`, for the message; `agents`: the agents' names in
    row order (default: row i is agent i; a runtime agent watches its own row only)."""

    def __init__(self, step_size: Callable[[int], float], agents: list[int] | None = None) -> None:
        self._step_size = step_size
        self._agents = agents
        self._notes: list[tuple[int, str]] = []
        self._peaks: list[torch.Tensor] = []
        self._last_model: torch.Tensor | None = None

    def note(self, t: int, what: str, rows: torch.Tensor) -> None:
        """Keep the per-agent largest magnitudes of `rows` (`(n, d)`, or `(d,)` for one agent),
        `what` of step `t` (a key of the watched quantities: model, gradient, noise, message,
        tracking)."""
        flat = rows.detach().reshape(rows.shape[0] if rows.ndim > 1 else 1, -1)
        self._peaks.append(flat.abs().amax(dim=1))  # NaN where a value is NaN
        self._notes.append((t, what))
        if t - self._notes[0][0] >= WINDOW:
            self.check()

    def check(self) -> None:
        """Raise [`DivergenceError`][dpdl.errors.DivergenceError] for the first value kept that is
        not finite; forget them all otherwise."""
        if not self._peaks:
            return
        peaks = torch.stack([p.to(torch.float64) for p in self._peaks])
        bad = ~torch.isfinite(peaks)
        models = [r for r, (_, what) in enumerate(self._notes) if what in ("model", "message")]
        if not bool(bad.any()):
            if models:
                self._last_model = peaks[models[-1]]
            self._peaks.clear()
            self._notes.clear()
            return
        row = int(bad.any(dim=1).nonzero()[0, 0])
        t, what = self._notes[row]
        columns = bad[row].nonzero()[:, 0].tolist()
        names = columns if self._agents is None else [self._agents[c] for c in columns]
        kind = "nan" if bool(torch.isnan(peaks[row, columns[0]])) else "inf"
        before = [r for r in models if r < row]
        model = peaks[before[-1]] if before else self._last_model
        peak = None if model is None else float(model[columns[0]])
        raise divergence(t, names, what, kind, float(self._step_size(max(t, 1))), peak)


def divergence(
    t: int,
    agents: list[int],
    what: str,
    kind: str,
    step_size: float,
    peak: float | None = None,
) -> DivergenceError:
    """The error of step `t`, where `agents`' `what` (a key of the watched quantities) is first
    `kind` (nan or inf), under step size `step_size`, the first agent's model having had largest
    magnitude `peak` before (None: not known)."""
    cause = _cause(what, kind, step_size, peak)
    others = len(agents) - 1
    who = f"agent {agents[0]}'s" + (
        f" (and {others} other agent{'s' if others > 1 else ''}')" if others else ""
    )
    where = "at the start" if t == 0 else ("after the step" if what == "model" else "")
    text = f"step {t}: {who} {_WHAT[what]} is not finite ({kind})"
    text += f" {where}" if where else ""
    return DivergenceError(f"{text}; {cause}", t, agents[0], cause)


def check_metrics(
    t: int,
    metrics: Mapping[str, float],
    step_size: float | None = None,
    peak: Callable[[], float] | None = None,
) -> None:
    """Raise [`DivergenceError`][dpdl.errors.DivergenceError] if a metric of step `t` is not
    finite (the models were checked finite before they were evaluated). `peak()`: the models'
    largest magnitude, asked only then: models past `HUGE` blame `step_size`."""
    for name, value in metrics.items():
        if isinstance(value, float) and not math.isfinite(value):
            largest = None if peak is None else peak()
            if largest is not None and largest > HUGE:
                cause = (
                    f"the models grew to {largest:.3g}: the step size "
                    + ("" if step_size is None else f"{step_size:g} ")
                    + "may be too large"
                )
            else:
                cause = "the task's loss or metric returns NaN or inf on finite models"
            raise DivergenceError(
                f"step {t}: the metric {name} is {value} though the models are finite; {cause}",
                t,
                None,
                cause,
            )
