"""`dpdl factorize`: MAFALDA-SGD's local noise correlation for a graph, against the baselines.

For a gossip matrix and cyclic (k, b)-participation (T = k b steps, or blocks of `restart` steps
with correlation restarts), optimise the local encoder (Lemma 12, Algorithm 2) and compare it with
independent noise (DP-D-SGD, the identity factorization), AntiPGD and the Toeplitz strategies of
centralized DP training (the square root, BSR, BandMF, BISR and BLT;
[`toeplitz_strategies`][dpdl.experiments.factorize.toeplitz_strategies]) on the two numbers that
matter: the encoder's
sensitivity, and the squared error of the gossiped models that noise of unit privacy causes,
`sens^2 tr(H X^-1)` (eq. (9)); the noise multiplier each needs for (eps, delta)-DP against LDP
follows from the sensitivity (per unit of per-row gradient sensitivity). With `per_agent`, also
MAFALDA-L-SGD (the authors' code): every agent's encoder optimised for its own share of the error,
saved as `encoders_per_agent.npy` (`n x T x T`).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from dpdl.errors import ConfigError
from dpdl.experiments.results import json_safe
from dpdl.factorization.blt import DEFAULT_BUFFER, blt_strategy
from dpdl.factorization.generalized_sensitivity import pattern_sensitivity
from dpdl.factorization.mafalda import (
    agent_utility_grams,
    local_sensitivity,
    noise_error,
    optimize_agents,
    optimize_local,
    restarted,
    sigma_for_sensitivity,
    utility_gram,
)
from dpdl.factorization.min_separation import MinSeparated, min_separated_sensitivity
from dpdl.factorization.participation import Participation
from dpdl.factorization.strategy import Strategy
from dpdl.factorization.toeplitz import (
    bandmf_encoder,
    bisr_strategy,
    bsr_encoder,
    sqrt_strategy,
)
from dpdl.jobspec.costs import FACTORIZE_ADVICE, factorize_estimate
from dpdl.jobspec.resources import require_fits
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise

__all__ = [
    "PARTICIPATIONS",
    "EncoderRow",
    "FactorizeResult",
    "factorize",
    "toeplitz_strategies",
    "write_factorize",
]

#: How the sensitivities are accounted: cyclic `(k, b)` or b-min-separated `(k, b)`.
PARTICIPATIONS = ("cyclic", "min-sep")


@dataclass(frozen=True)
class EncoderRow:
    """One local encoder: its sensitivity, its loss, the noise multiplier it needs, and the
    floats of noise state the engine keeps for it per agent and coordinate
    ([`plan`][dpdl.mechanisms.noise_streams.plan] of its noise source)."""

    method: str
    sensitivity: float
    loss: float
    loss_ratio_to_dp_dsgd: float
    sigma_per_unit_sensitivity: float
    memory_per_step: int
    #: `"exact"`, `"closed form"` (both the value itself) or `"upper bound"` (certified).
    sensitivity_kind: str = "exact"


@dataclass(frozen=True)
class FactorizeResult:
    steps: int
    participations: int
    batches: int
    restart: int | None
    eps: float
    delta: float
    iterations: int
    converged: bool
    seconds: float
    rows: list[EncoderRow]
    encoder: np.ndarray
    #: MAFALDA-L-SGD's encoders (``n x T x T``), when asked for.
    per_agent: np.ndarray | None = None
    #: The participation the sensitivities are accounted under (one of `PARTICIPATIONS`).
    participation: str = "cyclic"


def factorize(
    weights: np.ndarray,
    participations: int,
    batches: int,
    eps: float,
    delta: float,
    restart: int | None = None,
    per_agent: bool = False,
    participation: str = "cyclic",
    bands: int | None = None,
    buffer: int | None = None,
) -> FactorizeResult:
    """MAFALDA's encoder for `weights` under cyclic (`participations`,
    `batches`)-participation; with `per_agent`, MAFALDA-L-SGD's too (`n` times the work,
    `n T^2` floats for the agents' utility Gram matrices). Its memory and time are estimated
    first ([`factorize_estimate`][dpdl.jobspec.costs.factorize_estimate]: the `T x T` matrices
    of the encoders and of their L-BFGS optimisation, the utility Gram matrix) and a
    factorization that cannot fit is refused before any is allocated. The Toeplitz strategies
    ([`toeplitz_strategies`][dpdl.experiments.factorize.toeplitz_strategies]) take `bands` and
    `buffer`; with `restart`, every strategy is computed for one block and restarted.

    With `participation="min-sep"`, the sensitivities, losses and noise multipliers are accounted
    under b-min-separated `(k, b)`-participation
    ([`MinSeparated`][dpdl.factorization.min_separation.MinSeparated]: any k steps at least b
    apart), which covers every data order; the encoders are still optimised for cyclic
    participation, the order the engine trains with."""
    if participation not in PARTICIPATIONS:
        raise ConfigError(
            f"unknown participation {participation!r}; known: {', '.join(PARTICIPATIONS)}"
        )
    steps = participations * batches
    if restart is not None and (restart % batches or steps % restart):
        raise ConfigError(
            f"a restart block must be a multiple of b={batches} dividing T={steps}, got {restart}"
        )
    n = weights.shape[0]
    asymmetry = abs(weights - weights.T)
    symmetric = bool(asymmetry.max() <= 1e-12) if n else True
    require_fits(
        factorize_estimate(n, participations, batches, restart, per_agent, symmetric),
        f"the factorization (n = {n:,} agents, T = {steps:,} steps)",
        advice=FACTORIZE_ADVICE,
    )
    # after the estimate: its k b steps' patterns alone are 10^8 integers at k = b = 10^4
    cyclic = Participation.cyclic(steps, participations, batches)
    accounted = (
        MinSeparated(steps, participations, batches) if participation == "min-sep" else cyclic
    )
    if bands is not None and not 1 <= bands <= (restart or steps):
        raise ConfigError(f"bands (--bands) must be in [1, {restart or steps}], got {bands}")
    if sparse.issparse(weights):  # a graph from 1000 agents on: the factorization is dense
        weights = weights.toarray()
    start = time.perf_counter()
    utility = utility_gram(weights, steps)
    if restart is None:
        result = optimize_local(utility, cyclic)
        mafalda = result.encoder
    else:
        block = Participation.cyclic(restart, restart // batches, batches)
        result = optimize_local(utility_gram(weights, steps, block=restart), block)
        mafalda = restarted(result.encoder, steps)
    encoders = {
        "dp-dsgd": np.eye(steps),
        "antipgd": np.tril(np.ones((steps, steps))),
        "mafalda": mafalda,
    }
    if restart is None:
        strategies = toeplitz_strategies(utility, cyclic, bands, buffer)
    else:  # the block's, restarted (its decoder too: a banded C^-1 stays banded)
        block_utility = utility_gram(weights, steps, block=restart)
        strategies = {
            name: Strategy(
                restarted(found.encoder, steps),
                None if found.decoder is None else restarted(found.decoder, steps),
            )
            for name, found in toeplitz_strategies(block_utility, block, bands, buffer).items()
        }
    encoders.update({name: strategy.encoder for name, strategy in strategies.items()})
    if per_agent:
        grams = agent_utility_grams(weights, steps, block=restart)
        found = optimize_agents(grams, block if restart is not None else cyclic)
        encoders["mafalda-l"] = np.stack(
            [r.encoder if restart is None else restarted(r.encoder, steps) for r in found]
        )
        if restart is not None:
            grams = agent_utility_grams(weights, steps)
        utility = grams  # the agents' terms: the shared encoders' losses are unchanged
    seconds = time.perf_counter() - start
    sensitivities = {  # each encoder's, and how it was found, once: the loss and sigma use it
        method: _sensitivity(encoder, accounted) for method, encoder in encoders.items()
    }
    losses = {
        method: sensitivities[method][0] ** 2 * noise_error(utility, encoder)
        for method, encoder in encoders.items()
    }
    rows = [
        EncoderRow(
            method,
            sensitivities[method][0],
            losses[method],
            losses[method] / losses["dp-dsgd"],
            sigma_for_sensitivity(sensitivities[method][0], eps, delta),
            _memory_per_step(strategies.get(method, Strategy(encoder))),
            sensitivities[method][1],
        )
        for method, encoder in encoders.items()
    ]
    return FactorizeResult(
        steps,
        participations,
        batches,
        restart,
        eps,
        delta,
        result.iterations,
        result.converged,
        seconds,
        rows,
        mafalda,
        encoders.get("mafalda-l"),
        participation,
    )


def _sensitivity(
    encoder: np.ndarray, participation: Participation | MinSeparated
) -> tuple[float, str]:
    """[`local_sensitivity`][dpdl.factorization.mafalda.local_sensitivity] of the encoder (the
    largest of a stack's) and how it was found: cyclic patterns are all scored (`"exact"`);
    b-min-separated ones by the closed form, exactly or as a certified upper bound, as
    [`min_separated_sensitivity`][dpdl.factorization.min_separation.min_separated_sensitivity]
    says."""
    if not isinstance(participation, MinSeparated):
        return local_sensitivity(encoder, participation), "exact"
    found = [
        min_separated_sensitivity(one, participation, pattern_sensitivity)
        for one in (encoder[None] if encoder.ndim == 2 else encoder)
    ]
    kinds = {one.method for one in found}
    sensitivity = max(math.sqrt(one.squared) for one in found)
    return sensitivity, "upper bound" if "upper bound" in kinds else kinds.pop()


def toeplitz_strategies(
    utility: np.ndarray,
    participation: Participation,
    bands: int | None = None,
    buffer: int | None = None,
) -> dict[str, Strategy]:
    """The square-root factorization and its banded relatives
    ([`toeplitz`][dpdl.factorization.toeplitz]) and the BLT ([`blt`][dpdl.factorization.blt])
    for the utility Gram matrix `utility` under `participation`, by mechanism name: `bands`
    (default: the participation's separation) for `bsr`, `bandmf` and `bisr`, `buffer` (default
    `DEFAULT_BUFFER`) for `blt`."""
    return {
        "sqrt": sqrt_strategy(participation),
        "bsr": Strategy(bsr_encoder(participation, bands)),
        "bandmf": Strategy(bandmf_encoder(utility, participation, bands)),
        "bisr": bisr_strategy(participation, bands),
        "blt": blt_strategy(utility, participation, buffer or DEFAULT_BUFFER),
    }


def _memory_per_step(strategy: Strategy) -> int:
    """The floats of noise state per agent and coordinate the engine keeps for `strategy`: those
    of the noise source a run of it builds
    ([`LocalCorrelatedNoise`][dpdl.mechanisms.time_correlated.LocalCorrelatedNoise])."""
    encoder = strategy.encoder
    agents = encoder.shape[0] if encoder.ndim == 3 else 1
    return LocalCorrelatedNoise(
        agents, encoder, 0.0, decoder=strategy.decoder, buffer=strategy.buffer
    ).memory_per_step


def write_factorize(result: FactorizeResult, folder: Path) -> tuple[str, dict[str, Any], Path]:
    """A table for the terminal and the JSON-safe summary; `encoder.npy` (MAFALDA's C_local) and
    `factorize.json` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "encoder.npy", result.encoder)
    if result.per_agent is not None:
        np.save(folder / "encoders_per_agent.npy", result.per_agent)
    summary = {
        key: value
        for key, value in asdict(result).items()
        if key not in ("encoder", "per_agent", "rows")
    }
    summary["rows"] = [asdict(row) for row in result.rows]
    summary = json_safe(summary)
    (folder / "factorize.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"{'method':<10} {'sensitivity':>12} {'loss':>12} {'vs DP-D-SGD':>12} {'sigma / Delta':>14}"
        f" {'memory':>7}"
    ]
    lines += [
        f"{row.method:<10} {row.sensitivity:>12.4g} {row.loss:>12.4g} "
        f"{row.loss_ratio_to_dp_dsgd:>11.3g}x {row.sigma_per_unit_sensitivity:>14.4g}"
        f" {row.memory_per_step:>7}"
        for row in result.rows
    ]
    lines.append(
        "memory: floats of noise state kept per agent and coordinate from one step to the next"
    )
    bounded = [row.method for row in result.rows if row.sensitivity_kind == "upper bound"]
    if bounded:
        lines.append(
            f"({', '.join(bounded)}: too many {result.participation} patterns to score, "
            "sensitivity a certified upper bound and sigma its noise multiplier)"
        )
    return "\n".join(lines), summary, folder
