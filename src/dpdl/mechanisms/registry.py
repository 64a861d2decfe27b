"""Mechanisms by name, each calibrated to a budget: what `dpdl train`, `noise` and `audit`
use.

Every factory takes the graph, its mixing matrix, the calibration and
[`DesignOptions`][dpdl.settings.DesignOptions], and returns a mechanism whose guarantee against the
threat it is designed for is the calibrated one. They are registered by import path in
`dpdl.choices.MECHANISM_REGISTRY`, which
[`build_mechanism`][dpdl.mechanisms.registry.build_mechanism] dispatches through; a mechanism
defined elsewhere is registered with `@MECHANISM_REGISTRY.register(name, help=...)`
(`examples/custom_mechanism.py`).
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np

from dpdl.accounting.accountant import step_sensitivity
from dpdl.accounting.calibration import Calibration, noise_scale, safe_scale
from dpdl.choices import (
    DECOR_SEARCH_REGISTRY,
    DECOR_SEARCHES,
    FACTORIZED_REGISTRY,
    MECHANISM_REGISTRY,
)
from dpdl.errors import ConfigError
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.mechanisms.horizon import objective_weight
from dpdl.mechanisms.independent import CentralDP, LocalDP, NoNoise
from dpdl.mechanisms.lppa import design_noise_flow
from dpdl.mechanisms.whisper import (
    MultiSeedWhisper,
    dense_weights,
    design_whisper,
    disjoint_groups,
)
from dpdl.mechanisms.zero_sum import design_zero_sum
from dpdl.settings import DesignOptions
from dpdl.threats import CentralObserver, Colluding, Eavesdropper, ThreatModel, threat_by_name

__all__ = [
    "DECOR_SEARCHES",
    "MECHANISMS",
    "MECHANISM_REGISTRY",
    "DesignOptions",
    "build_mechanism",
]


Factory = Callable[[nx.Graph, np.ndarray, Calibration, DesignOptions], NoiseMechanism]


def _ldp(
    graph: nx.Graph, weights: np.ndarray, calibration: Calibration, options: DesignOptions
) -> NoiseMechanism:
    n = weights.shape[0]
    return LocalDP(n, noise_scale(LocalDP(n, 1.0), Eavesdropper(), calibration))


def _cdp(
    graph: nx.Graph, weights: np.ndarray, calibration: Calibration, options: DesignOptions
) -> NoiseMechanism:
    n = weights.shape[0]
    return CentralDP(n, noise_scale(CentralDP(n, 1.0), CentralObserver(), calibration))


def _decor(
    graph: nx.Graph, weights: np.ndarray, calibration: Calibration, options: DesignOptions
) -> NoiseMechanism:
    threat = threat_by_name(options.threat)
    objective = objective_weight(weights, options)
    entry, parameter = DECOR_SEARCH_REGISTRY.match(options.decor_search)
    arguments = (graph, weights, calibration, threat, objective)
    search = entry.load()
    return search(*arguments) if parameter is None else search(*arguments, parameter)


def _whisper(
    graph: nx.Graph, weights: np.ndarray, calibration: Calibration, options: DesignOptions
) -> NoiseMechanism:
    return design_whisper(weights, calibration, objective_weight(weights, options))


def _multiseed(
    graph: nx.Graph, weights: np.ndarray, calibration: Calibration, options: DesignOptions
) -> NoiseMechanism:
    from dpdl.solvers.coalition import (
        solve_multiseed,
    )  # CVXPY: 0.3 s to import, for this design alone

    weights = dense_weights(weights, "CorN-DSGD's multi-seed design (a dense n x n covariance)")
    n = weights.shape[0]
    if options.groups > n:
        raise ConfigError(
            f"groups: {options.groups} disjoint seed groups need at least as many agents, the "
            f"graph has {n}"
        )
    if options.q >= n:
        raise ConfigError(
            f"q: a coalition of {options.q} agents leaves no honest agent in a graph of {n}"
        )
    groups = disjoint_groups(n, options.groups)
    solution = solve_multiseed(
        weights,
        groups,
        options.q,
        calibration.inverse_variance_bound,
        objective=objective_weight(weights, options),
    )
    threat: ThreatModel = Colluding(options.q) if options.q else Eavesdropper()

    def build(scale: float) -> MultiSeedWhisper:
        return MultiSeedWhisper(
            n,
            scale**2 * solution.sigma_mix2,
            groups,
            [scale**2 * b for b in solution.blocks],
            options.q,
        )

    # The solver meets its constraint only to its tolerance, loosely where the bound c is small (at
    # eps = 0.05, delta = 1e-10 its solution used 70% of the budget's mu_step): scale it to the
    # budget (the sensitivity scales as 1 / scale), then let the accountant confirm.
    unit = step_sensitivity(build(1.0), threat, calibration.neighbouring)
    return build(safe_scale(build, threat, calibration, unit / calibration.mu_step))


def _zero_sum(
    graph: nx.Graph, weights: np.ndarray, calibration: Calibration, options: DesignOptions
) -> NoiseMechanism:
    return design_zero_sum(graph, calibration)


def _lppa(
    graph: nx.Graph, weights: np.ndarray, calibration: Calibration, options: DesignOptions
) -> NoiseMechanism:
    return design_noise_flow(graph, calibration)


#: The built-in calibrated mechanisms by CLI name, the targets of
#: :data:`dpdl.choices.MECHANISM_REGISTRY`'s entries ("none" takes no budget).
MECHANISMS: dict[str, Factory] = {
    "ldp": _ldp,
    "cdp": _cdp,
    "decor": _decor,
    "whisper": _whisper,
    "whisper-multiseed": _multiseed,
    "zero-sum": _zero_sum,
    "lppa": _lppa,
}


def build_mechanism(
    name: str,
    graph: nx.Graph,
    weights: np.ndarray,
    calibration: Calibration | None,
    options: DesignOptions | None = None,
) -> NoiseMechanism:
    """Mechanism `name` for `graph` and its mixing matrix, calibrated to `calibration`.

    `"none"` needs no calibration; every other mechanism does.
    """
    if name == NoNoise.name:
        return NoNoise(weights.shape[0])
    if name in FACTORIZED_REGISTRY:
        raise ConfigError(
            f"mechanism {name!r} correlates each agent's noise over time: it has no per-round "
            "design; train it with dpdl train or TrainConfig(mechanism=..., clip_level='example')"
        )
    if name not in MECHANISM_REGISTRY:
        raise ConfigError(
            f"unknown mechanism {name!r}; known: none, {', '.join(MECHANISM_REGISTRY.names())}"
        )
    if calibration is None:
        raise ConfigError(f"mechanism {name!r} needs a privacy budget (eps, delta)")
    options = options or DesignOptions()
    options.check_applies(name)
    factory = MECHANISM_REGISTRY.get(name)
    mechanism = factory(graph, weights, calibration, options)
    if not isinstance(mechanism, NoiseMechanism):
        raise ConfigError(
            f"mechanism {name!r} built a {type(mechanism).__name__}, not a NoiseMechanism"
        )
    mechanism.calibration = calibration
    return mechanism
