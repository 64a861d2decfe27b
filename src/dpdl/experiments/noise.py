"""Noise design reports: what `dpdl noise` and `dpdl audit` compute.

For a graph, a mixing matrix and a budget: build a mechanism calibrated to the budget, measure the
noise variance left after mixing, `Tr(W R W^T)` (the privacy term of CorN-DSGD Theorem 1), and
account it against every threat model. Epsilons are exact (GDP) whatever the calibration used; the
papers' RDP bound is reported next to them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import torch

from dpdl.accounting import AgentLevel, Calibration, account, calibrate, epsilon_from_mu_step
from dpdl.attacks import membership_lower_bound, sum_attack_error
from dpdl.attacks.membership import MAX_COALITIONS
from dpdl.errors import ConfigError
from dpdl.graphs import summarize
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.mechanisms.registry import DesignOptions, build_mechanism
from dpdl.seeding import purpose_rng
from dpdl.simulation import clip_rows
from dpdl.threats import CentralObserver, Colluding, Eavesdropper, ThreatModel

__all__ = ["DEFAULT_THREATS", "NoiseReport", "noise_report"]

DEFAULT_THREATS: tuple[ThreatModel, ...] = (
    Eavesdropper(),
    Colluding(1),
    Colluding(2),
    CentralObserver(),
)


@dataclass
class NoiseReport:
    """One mechanism on one graph and budget, accounted against several threats."""

    method: str
    calibration: Calibration
    trace_wrw: float
    solve_seconds: float
    epsilon: dict[str, float]
    epsilon_exact: dict[str, bool]
    epsilon_paper_rdp: dict[str, float]
    coalitions: dict[str, int]
    mechanism: dict[str, Any]
    graph: dict[str, Any] = field(default_factory=dict)
    #: When attacked: the membership test's empirical lower bound on epsilon per threat
    #: (:mod:`dpdl.attacks.membership`; NaN where the threat has too many coalitions to search) ...
    epsilon_lower_bound: dict[str, float] = field(default_factory=dict)
    #: ... the same test's Gaussian-fit lower bound (it can meet the upper bound) ...
    epsilon_lower_bound_fit: dict[str, float] = field(default_factory=dict)
    #: ... each test's details, and the eavesdropper's sum attack
    #: (:mod:`dpdl.attacks.eavesdropper`).
    attack: dict[str, Any] = field(default_factory=dict)
    #: The calibrated mechanism itself, whose covariance R ``dpdl noise --plot`` draws
    #: (:func:`dpdl.experiments.plots.plot_covariances`); not part of :meth:`as_dict`.
    noise: NoiseMechanism | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "method": self.method,
            "trace_WRW": self.trace_wrw,
            "epsilon": self.epsilon,
            "epsilon_exact": self.epsilon_exact,
            "epsilon_paper_rdp": self.epsilon_paper_rdp,
            "coalitions_enumerated": self.coalitions,
            "solve_seconds": self.solve_seconds,
            "calibration": self.calibration.as_dict(),
            "graph": self.graph,
            "mechanism": self.mechanism,
            **(
                {
                    "epsilon_lower_bound": self.epsilon_lower_bound,
                    "epsilon_lower_bound_gaussian_fit": self.epsilon_lower_bound_fit,
                    "attack": self.attack,
                }
                if self.attack
                else {}
            ),
        }
        for key in ("sigma_mix2", "sigma_pair2", "sigma_cor2", "sigma2", "sigma2_edge"):
            if key in self.mechanism:
                data[key] = self.mechanism[key]
        return data


def noise_report(
    method: str,
    graph: nx.Graph,
    weights: np.ndarray,
    eps: float,
    delta: float,
    steps: int,
    clip: float,
    calibration_method: str = "exact",
    threats: tuple[ThreatModel, ...] = DEFAULT_THREATS,
    design: DesignOptions | None = None,
    attack_trials: int | None = None,
    seed: int = 0,
) -> NoiseReport:
    """Calibrate `method` to (eps, delta) over `steps` steps and account it against `threats`;
    with `attack_trials`, also attack it as each threat (membership test with that many trials per
    hypothesis) and as the eavesdropper that sums the messages (on gradients of norm C), seeded by
    `seed`."""
    neighbouring = AgentLevel(clip)
    calibration = calibrate(eps, delta, steps, neighbouring, calibration_method)
    start = time.perf_counter()
    for threat in threats:
        too_large = isinstance(threat, Colluding) and threat.q >= graph.number_of_nodes()
        if too_large and threat not in DEFAULT_THREATS:  # asked for: an error, not a row left out
            raise ConfigError(
                f"threat {threat}: a coalition of {threat.q} agents leaves no honest agent in a "
                f"graph of {graph.number_of_nodes()}; nothing is private from it"
            )
    mechanism = build_mechanism(method, graph, weights, calibration, design)
    seconds = time.perf_counter() - start
    epsilon, exact, paper, coalitions = {}, {}, {}, {}
    for threat in threats:
        if isinstance(threat, Colluding) and threat.q >= mechanism.n:
            continue  # a default threat too large for a small graph
        report = account(mechanism, threat, neighbouring, steps, delta)
        epsilon[str(threat)] = report.epsilon
        exact[str(threat)] = report.exact
        coalitions[str(threat)] = report.coalitions
        paper[str(threat)] = epsilon_from_mu_step(
            report.mu_step, steps, delta, neighbouring, "paper-rdp"
        )
    lower: dict[str, float] = {}
    fitted: dict[str, float] = {}
    attack: dict[str, Any] = {}
    if attack_trials is not None:
        for threat in threats:
            name = str(threat)
            if name not in epsilon:
                continue
            if threat.coalition_count(mechanism.n) > MAX_COALITIONS:
                lower[name] = math.nan
                continue
            empirical = membership_lower_bound(
                mechanism,
                neighbouring.sensitivity,
                steps,
                delta,
                attack_trials,
                seed,
                threat=threat,
            )
            lower[name], attack[name] = empirical.epsilon, empirical.as_dict()
            if empirical.gaussian_fit is not None:
                fitted[name] = empirical.gaussian_fit
        gradients = clip_rows(
            torch.from_numpy(
                purpose_rng(seed, "sum attack gradients").standard_normal((mechanism.n, 1000))
            ),
            clip,
        ).numpy()
        error = sum_attack_error(mechanism, gradients, purpose_rng(seed, "sum attack noise"))
        attack.update(sum_attack_rms_error=error, sum_attack_relative_error=error / clip)
    return NoiseReport(
        method,
        calibration,
        mechanism.variance_after_mixing(weights),
        seconds,
        epsilon,
        exact,
        paper,
        coalitions,
        mechanism.describe(),
        summarize(graph, weights).as_dict(),
        lower,
        fitted,
        attack,
        mechanism,
    )
