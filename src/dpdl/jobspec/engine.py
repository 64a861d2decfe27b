"""How an engine steps: step-size schedules, the D-SGD configuration and the Poisson sampling rates
that example-level accounting reads.

Shared by the job builder ([`dpdl.jobspec.job`][dpdl.jobspec.job]), the simulation's engines
(`dpdl.simulation`, which re-exports [`StepSize`][dpdl.jobspec.engine.StepSize] and
[`DSGDConfig`][dpdl.jobspec.engine.DSGDConfig]) and the runtime's agents.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from dpdl.accounting.calibration import Calibration
from dpdl.accounting.neighbouring import ExampleLevel
from dpdl.choices import CLIP_LEVELS, SAMPLERS, SCHEDULES
from dpdl.errors import ConfigError, PrivacyParameterError

__all__ = ["DSGDConfig", "StepSize", "poisson_rates", "require_calibrated_for"]


@dataclass(frozen=True)
class StepSize:
    """`constant`: `eta_t = eta`; `inv-sqrt`: `eta_t = eta / sqrt(t)` (Whisper's quadratic
    task); `step`: `eta` for `t <= decay_after`, then `decay_factor * eta` (one decay:
    MAFALDA-SGD's released image code multiplies its step size by 0.1 once, `decentralized_
    simulation.py`)."""

    eta: float
    schedule: str = "constant"
    decay_after: int | None = None
    decay_factor: float = 0.1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.eta) and self.eta > 0):
            raise ConfigError(f"the step size must be a finite number > 0, got {self.eta}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(
                f"unknown step-size schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}"
            )
        if (self.schedule == "step") != (self.decay_after is not None):
            raise ConfigError(
                "the step-size schedule 'step' decays after a step (--decay-after), and only it "
                f"does; got schedule {self.schedule!r}, decay after {self.decay_after}"
            )
        if self.decay_after is not None and (
            isinstance(self.decay_after, bool)
            or not isinstance(self.decay_after, numbers.Integral)
            or self.decay_after < 1
        ):
            raise ConfigError(f"decay after must be a step >= 1, got {self.decay_after!r}")
        if not (math.isfinite(self.decay_factor) and self.decay_factor > 0):
            raise ConfigError(
                f"the decay factor must be a finite number > 0, got {self.decay_factor}"
            )

    def __call__(self, t: int) -> float:
        """Step size at step `t >= 1`."""
        if self.schedule == "constant":
            return self.eta
        if self.schedule == "inv-sqrt":
            return self.eta / math.sqrt(t)
        assert self.decay_after is not None
        return self.eta if t <= self.decay_after else self.decay_factor * self.eta


@dataclass(frozen=True)
class DSGDConfig:
    """How to run D-SGD: steps, step sizes, clipping, batches and evaluation cadence."""

    steps: int
    step_size: StepSize
    clip: float | None = None
    clip_level: str = "agent"
    batch_size: int = 128
    sampling: str = "uniform"
    eval_every: int = 100
    #: Batches per pass over the data for ``sampling="cyclic"`` (b of cyclic (k, b)-participation).
    cycle: int | None = None
    #: Also report every metric averaged over the iterates of the last ``average_last`` steps
    #: (``<metric>_tail`` in the last record; 0: none).
    average_last: int = 0
    #: Cyclic batches: divide each agent's clipped sum by the size of its smallest batch, fixed
    #: over the run, instead of by each batch's own size (:class:`~dpdl.jobspec.sampling.
    #: CyclicSampler`), so that adding or removing one example moves it by at most C / that size.
    fixed_divisor: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, numbers.Integral):
            raise ConfigError(f"the number of steps must be an integer, got {self.steps!r}")
        if self.steps < 1:
            raise ConfigError(f"the number of steps must be >= 1, got {self.steps}")
        if self.clip is not None and not (math.isfinite(self.clip) and self.clip > 0):
            raise ConfigError(
                f"the clipping threshold must be a finite number > 0, got {self.clip}"
            )
        if self.clip_level not in CLIP_LEVELS:
            raise ConfigError(
                f"unknown clipping level {self.clip_level!r}; known: {', '.join(CLIP_LEVELS)}"
            )
        if self.sampling not in SAMPLERS:
            raise ConfigError(
                f"unknown batch sampling {self.sampling!r}; known: {', '.join(SAMPLERS)}"
            )
        if (self.sampling == "cyclic") != (self.cycle is not None):
            raise ConfigError(
                "cyclic sampling needs the number of batches per cycle, and only it takes one"
            )
        if self.fixed_divisor and self.sampling != "cyclic":
            raise ConfigError(
                "a fixed divisor of the batch sum applies to cyclic batches only, not to "
                f"{self.sampling!r} sampling"
            )
        if self.eval_every < 1:
            raise ConfigError(f"eval_every must be >= 1, got {self.eval_every}")
        if not 0 <= self.average_last <= self.steps:
            raise ConfigError(
                f"average_last must be between 0 and the number of steps ({self.steps}), got "
                f"{self.average_last}"
            )


def require_calibrated_for(
    calibration: Calibration, config: DSGDConfig, sizes: np.ndarray | None = None
) -> None:
    """Raise [`PrivacyParameterError`][dpdl.errors.PrivacyParameterError] when running `config`
    would spend more privacy than `calibration`, the budget a mechanism's noise was sized for,
    accounts: more steps, another clipping threshold or level, or (at example level) another
    expected batch size, batches not drawn by Poisson sampling (uniform or cyclic batches are not
    the subsampled Gaussian the accountant amplified: a design for eps = 1 at rate q claims about
    19.7 when its batches are cycled), or a Poisson rate above the accounted one (`sizes`: each
    agent's number of examples, whose smallest sets the largest rate `batch_size / m_i`). The
    noise would then be too small for the run and the reported budget one the run did not have.
    Fewer steps and lower rates spend less, and are allowed."""
    unit = calibration.neighbouring
    level = "example" if isinstance(unit, ExampleLevel) else "agent"
    problems = []
    if config.steps > calibration.steps:
        problems.append(f"{config.steps} steps, but it was calibrated for {calibration.steps}")
    if config.clip_level != level:
        problems.append(f"{config.clip_level}-level clipping, but it was calibrated for {level}")
    if config.clip != unit.clip:
        problems.append(f"clip {config.clip}, but it was calibrated for clip {unit.clip:g}")
    if isinstance(unit, ExampleLevel):
        problems += _sampling_problems(unit, config, sizes)
    if problems:
        raise PrivacyParameterError(
            f"the mechanism's noise does not fit this run: {'; '.join(problems)} (for "
            f"eps={calibration.eps:g}, delta={calibration.delta:g}); it would spend more privacy "
            "than accounted. Build the mechanism for this run's steps, clip and batches "
            "(calibrate() and build_mechanism(), or dpdl.design_noise)"
        )


def _sampling_problems(
    unit: ExampleLevel, config: DSGDConfig, sizes: np.ndarray | None
) -> list[str]:
    """How the run's batches differ from the Poisson-subsampled ones an example-level calibration
    accounts."""
    problems = []
    if config.batch_size != unit.batch_size:
        problems.append(
            f"batch size {config.batch_size}, but it was calibrated for {unit.batch_size}"
        )
    if config.sampling != "poisson":
        problems.append(
            f"{config.sampling} batches, but it was calibrated for Poisson sampling at rate "
            f"{unit.sampling_rate:.4g}"
        )
    elif sizes is not None:
        rate = float(poisson_rates(sizes, config.batch_size).max())
        if rate > unit.sampling_rate:
            problems.append(
                f"Poisson rate {rate:.4g} (expected batch {config.batch_size} of an agent's "
                f"{int(np.min(sizes))} examples), but it was calibrated for rate "
                f"{unit.sampling_rate:.4g}"
            )
    return problems


def poisson_rates(sizes: np.ndarray, batch_size: int) -> np.ndarray:
    """The rate `q_i = batch_size / m_i` at which each example of agent i joins its batch under
    Poisson sampling (`dpdl.simulation.PoissonSampler`); the largest is the rate example-level
    accounting assumes for every agent
    ([`dpdl.jobspec.job.neighbouring`][dpdl.jobspec.job.neighbouring])."""
    sizes = np.asarray(sizes)
    if batch_size < 1:
        raise ConfigError(f"the batch size must be >= 1, got {batch_size}")
    if batch_size > sizes.min():
        raise ConfigError(
            f"Poisson sampling with expected batch {batch_size} needs every agent to hold at "
            f"least that many examples; the smallest agent holds {sizes.min()}"
        )
    return batch_size / sizes
