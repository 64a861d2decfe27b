"""A training job whose noise is correlated over time: MF-D-SGD with a local encoder (MAFALDA-SGD
Algorithm 1), calibrated and accounted by the encoder's sensitivity (Theorem 8).

Each agent's examples are cut once into `b` batches used in turn (cyclic `(k, b)`-participation, `k
= ceil(T / b)`; `CyclicSampler`) and each example's gradient is clipped at C, so replacing one
example moves its batch mean by at most `Delta = 2 C / m` (`m` the smallest batch, the smallest
agent's examples // b) at k steps; under add / remove (`neighbouring="add-remove"`, the MAFALDA-SGD
code's relation) each batch's clipped sum is divided by its agent's smallest batch, fixed, so that
one example more or less moves it by at most `Delta = C / m`. Agent u's noise at step t is `sum_s
(C_local^-1)[t, s] z_s` with `z ~ N(0, sigma^2)` drawn from its own seed, so an attacker who sees
every message (LDP's) knows nothing more than an honest-but-curious agent does: both get `mu = Delta
sens(C_local) / sigma`-GDP (Theorem 8, `B` square and invertible under LDP). sigma is the smallest
meeting `(eps, delta)` ([`noise_multiplier`][dpdl.factorization.mafalda.noise_multiplier]), or,
given a budget `gdp_mu`, `Delta sens(C_local) / mu` (the code's); the reported eps is the GDP's,
never above the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy import sparse

from dpdl.accounting import PrivacyReport, gdp
from dpdl.choices import FACTORIZED_OPTIONS, FACTORIZED_REGISTRY
from dpdl.errors import ConfigError
from dpdl.factorization.mafalda import gdp_noise_multiplier, local_sensitivity, noise_multiplier
from dpdl.factorization.participation import Participation
from dpdl.factorization.strategy import Strategy, as_strategy
from dpdl.jobspec.config import TrainConfig
from dpdl.mechanisms.independent import NoNoise
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise
from dpdl.tasks import Task
from dpdl.threats import Colluding, Eavesdropper

__all__ = [
    "ACCOUNTANT",
    "Factorized",
    "build_factorized",
    "cycle_of",
    "encoder_for",
    "strategy_for",
    "strategy_options",
    "with_gdp_budget",
]

#: The accountant the reports name.
ACCOUNTANT = "matrix-factorization GDP (MAFALDA-SGD Thm. 8)"


@dataclass(frozen=True)
class Factorized:
    """A time-correlated mechanism built for one job: its noise, the batches per cycle, and what
    it is accounted to give (against the eavesdropper, then an honest-but-curious agent)."""

    noise: LocalCorrelatedNoise
    cycle: int
    reports: list[PrivacyReport]


def cycle_of(config: TrainConfig, task: Task) -> int:
    """`config`'s batches per cycle (b), given or the smallest agent's examples // batch size,
    checked against `task`'s agents."""
    sizes = task.agent_sizes
    if sizes is None:
        raise ConfigError(
            f"task {task.name!r} has no examples: mechanism {config.mechanism!r} cycles each "
            "agent's examples in batches"
        )
    smallest = int(sizes.min())
    cycle = config.cycle if config.cycle is not None else smallest // config.batch_size
    if cycle < 1:
        raise ConfigError(
            f"batch_size (--batch-size) is {config.batch_size}, more than the {smallest} examples "
            "of the smallest agent: no batch fits in a cycle"
        )
    if cycle > smallest:
        raise ConfigError(
            f"cycle (--cycle) is {cycle} batches, more than the {smallest} examples of the "
            "smallest agent: some batches would be empty"
        )
    return cycle


@lru_cache(maxsize=8)
def _strategy(
    name: str,
    weights: bytes,
    n: int,
    steps: int,
    cycle: int,
    options: tuple[tuple[str, int], ...],
) -> Strategy:
    """The encoder of mechanism `name` for the gossip `weights` (an `n x n` float64 matrix's
    bytes) under cyclic participation, with its `options` (`bands`, `buffer`), read-only: kept
    for the process, since every seed of a job (and every point of a sweep on one graph) needs
    the same one, and MAFALDA's optimisation takes seconds to minutes (Algorithm 2's L-BFGS over
    T x T matrices)."""
    participation = Participation.cyclic(steps, -(-steps // cycle), cycle)
    matrix = np.frombuffer(weights).reshape(n, n)
    return as_strategy(FACTORIZED_REGISTRY.get(name)(matrix, participation, **dict(options)))


def strategy_for(
    name: str, weights: np.ndarray, steps: int, cycle: int, **options: int
) -> Strategy:
    """The [`Strategy`][dpdl.factorization.strategy.Strategy] of mechanism `name`
    (`FACTORIZED_REGISTRY`) for the gossip `weights` (dense or sparse) over `steps` steps of
    cyclic participation in `cycle` batches, with its `options` (`bands`, `buffer`; only those
    given), read-only, from the process's cache: what a job of that mechanism runs with."""
    dense = weights.toarray() if sparse.issparse(weights) else np.asarray(weights, dtype=float)
    key = tuple(sorted(options.items()))
    return _strategy(name, dense.tobytes(), dense.shape[0], steps, cycle, key)


def encoder_for(
    name: str, weights: np.ndarray, steps: int, cycle: int, **options: int
) -> np.ndarray:
    """The encoder `C_local` of [`strategy_for`][dpdl.jobspec.factorized.strategy_for]."""
    return strategy_for(name, weights, steps, cycle, **options).encoder


def strategy_options(config: TrainConfig) -> dict[str, int]:
    """The options of `config` its mechanism takes (`FACTORIZED_OPTIONS`) and that it gives."""
    names = FACTORIZED_OPTIONS.get(config.mechanism, ())
    return {name: getattr(config, name) for name in names if getattr(config, name) is not None}


def with_gdp_budget(config: TrainConfig) -> TrainConfig:
    """`config`, its `eps` set to what `gdp_mu` gives at `delta` where a mu-GDP budget is
    given: one budget, stated in both units (an `eps` other than the default or that value beside
    `gdp_mu` is an error asking for one)."""
    if config.gdp_mu is None:
        return config
    eps = gdp.epsilon(config.gdp_mu, config.delta)
    if not 0.0 < eps < math.inf:
        raise ConfigError(
            f"gdp_mu (--gdp-mu) {config.gdp_mu:g} gives eps {eps:g} at delta {config.delta:g}: "
            "no budget eps in (0, inf) to report"
        )
    if config.eps not in (TrainConfig.eps, eps):
        raise ConfigError(
            f"give one budget: eps (--eps) {config.eps:g} or gdp_mu (--gdp-mu) "
            f"{config.gdp_mu:g} (eps {eps:.6g} at delta {config.delta:g}), not both"
        )
    return replace(config, eps=eps)


def build_factorized(config: TrainConfig, weights: np.ndarray, task: Task) -> Factorized:
    """`config.mechanism`'s encoder for the gossip `weights` under `config`'s cyclic
    participation, its noise calibrated to `(config.eps, config.delta)` (module doc); for
    `none` (with a cycle) the same batches without noise, which gives no guarantee."""
    cycle = cycle_of(config, task)
    steps = config.steps
    participations = -(-steps // cycle)
    participation = Participation.cyclic(steps, participations, cycle)
    noiseless = config.mechanism == NoNoise.name
    strategy = strategy_for(
        "dp-dsgd" if noiseless else config.mechanism,
        weights,
        steps,
        cycle,
        **strategy_options(config),
    )
    encoder = strategy.encoder
    batch = int(task.agent_sizes.min()) // cycle
    replace_one = config.neighbouring == "replace"
    row = (2.0 if replace_one else 1.0) * config.clip / batch
    sensitivity = local_sensitivity(encoder, participation)
    if noiseless:
        sigma, mu = 0.0, math.inf
    else:
        sigma = (
            gdp_noise_multiplier(encoder, participation, row, config.gdp_mu, config.delta)
            if config.gdp_mu is not None
            else noise_multiplier(encoder, participation, row, config.eps, config.delta)
        )
        mu = row * sensitivity / sigma
    divisor = "" if replace_one else ", each sum divided by its agent's smallest batch"
    relation = (
        f"example-level ({'replace' if replace_one else 'add or remove'} one; clip {config.clip:g} "
        f"per example, batches of >= {batch} in a cycle of {cycle}{divisor}: "
        f"{participation.name})"
    )
    reports = [
        PrivacyReport(
            gdp.epsilon(mu, config.delta),  # inf without noise
            config.delta,
            steps,
            mu / math.sqrt(steps),
            str(threat),
            relation,
            "none (no noise)" if noiseless else ACCOUNTANT,
        )
        for threat in (Eavesdropper(), Colluding(1))
    ]
    noise = LocalCorrelatedNoise(
        weights.shape[0],
        encoder,
        sigma,
        config.mechanism,
        sensitivity,
        decoder=strategy.decoder,
        buffer=strategy.buffer,
    )
    return Factorized(noise, cycle, reports)
