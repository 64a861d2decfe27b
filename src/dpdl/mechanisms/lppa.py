"""LPPA's noise flow and the DP baseline it is measured against, as noise in gradient tracking.

LPPA (Miao et al., "Lossless Privacy-Preserving Aggregation for Decentralized Federated Learning",
2025, Algorithm 1): in one extra round every agent i draws `delta_li` for each out-neighbour l
and sends it; it then injects the noise difference `sum_out delta_li - sum_in delta_ij` into its
initial tracking variable `gamma_i^0` (line 6); injecting again every round is the option the
paper mentions at the end of Section 5.2. With one column per arc, the injection is `B delta`
for the incidence matrix B (+1 at the arc's sender, -1 at its receiver), so `1^T B = 0`: the
noise differences sum to zero (the "noise flow conservation" behind Theorem 1), and the network
sum of the tracking variables carries no noise at all. The covariance `Var(delta) B B^T` is a
graph Laplacian, singular along `1`: whatever the noise distribution, an eavesdropper that adds
up the messages learns the sum of the agents' gradients exactly, so LPPA gives no differential
privacy against it (CorN-DSGD guideline (G1); the paper's "sqrt(2) times" claim of Theorem 2 is
the noise scale of one difference of two draws, not a privacy guarantee).

The DP baseline of the paper (its reference [5]) adds i.i.d. noise `zeta_i` to `gamma_i^0`. Both
draw Laplace noise of scale beta, as the paper does, or Gaussian noise of standard deviation sigma.
[`NoiseFlow`][dpdl.mechanisms.lppa.NoiseFlow] is the Gaussian noise flow as a
[`NoiseMechanism`][dpdl.mechanisms.base.NoiseMechanism], one shared secret per arc, so the
accountant and the audit treat it like every other design.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx
import numpy as np
from scipy import sparse

from dpdl.accounting.calibration import Calibration
from dpdl.accounting.noise import GaussianNoise, SharedSecret
from dpdl.choices import DISTRIBUTIONS, INJECTIONS
from dpdl.errors import ConfigError
from dpdl.mechanisms.base import NoiseMechanism, SeedBook
from dpdl.mechanisms.zero_sum import matched_to_ldp
from dpdl.settings import TrackingOptions
from dpdl.threats import Eavesdropper

__all__ = [
    "DISTRIBUTIONS",
    "INJECTIONS",
    "NoiseFlow",
    "TrackingNoise",
    "TrackingOptions",
    "build_injection",
    "design_noise_flow",
    "dp_noise",
    "flow_arcs",
    "lppa_noise",
]


def flow_arcs(graph: nx.Graph) -> list[tuple[int, int]]:
    """The arcs `(sender, receiver)` noise flows along: a directed graph's arcs, both directions
    of an undirected graph's edges; self-loops excluded."""
    arcs = (
        graph.edges()
        if graph.is_directed()
        else [arc for u, v in graph.edges() for arc in ((u, v), (v, u))]
    )
    return sorted((int(u), int(v)) for u, v in arcs if u != v)


def _incidence(n: int, arcs: list[tuple[int, int]]) -> sparse.csr_matrix:
    senders, receivers = np.array(arcs, dtype=int).reshape(-1, 2).T
    columns = np.arange(len(arcs))
    data = np.concatenate([np.ones(len(arcs)), -np.ones(len(arcs))])
    return sparse.csr_matrix(
        (data, (np.concatenate([senders, receivers]), np.concatenate([columns, columns]))),
        shape=(n, len(arcs)),
    )


@dataclass(frozen=True)
class TrackingNoise:
    """Noise `spread @ z` injected into the tracking variable, z i.i.d. per coordinate.

    `z` is Laplace of scale `scale` (variance `2 scale^2`) or Gaussian of standard deviation
    `scale`. Injected once, into `gamma^0`, or also every round when `every_round`.

    Not accounted, by design: its scale is sized for the attacks, not for a budget (the accountant
    reads Gaussian per-round descriptions only; [`NoiseFlow`][dpdl.mechanisms.lppa.NoiseFlow] is the
    accounted counterpart).
    """

    name: str
    spread: sparse.csr_matrix  # (n, k): agent i's injection is row i of spread @ z
    scale: float
    distribution: str = "laplace"
    every_round: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ConfigError(
                f"the {self.name} noise scale must be a finite number > 0, got {self.scale}"
            )
        if self.distribution not in DISTRIBUTIONS:
            raise ConfigError(
                f"unknown noise distribution {self.distribution!r}; known: "
                f"{', '.join(DISTRIBUTIONS)}"
            )

    @property
    def n(self) -> int:
        return self.spread.shape[0]

    @property
    def variance(self) -> float:
        """Variance of one draw of z."""
        return 2.0 * self.scale**2 if self.distribution == "laplace" else self.scale**2

    def sample(self, rng: np.random.Generator, dim: int) -> np.ndarray:
        """One injection for all agents, `(n, dim)`."""
        return np.asarray(self.spread @ self._draws(rng, (self.spread.shape[1], dim)))

    def _draws(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return (
            rng.laplace(0.0, self.scale, shape)
            if self.distribution == "laplace"
            else self.scale * rng.standard_normal(shape)
        )

    def seed_structure(self) -> GaussianNoise:
        """Who holds which draw, as plain data: one secret per column of `spread`, held by the
        agents it enters (an arc's two ends; a DP draw's agent), described as a Gaussian of the
        same covariance. Agents agree these seeds by key exchange like any design's
        (`dpdl.runtime`)."""
        columns = self.spread.tocsc()
        secrets = []
        for c in range(columns.shape[1]):
            rows = columns.indices[columns.indptr[c] : columns.indptr[c + 1]]
            values = columns.data[columns.indptr[c] : columns.indptr[c + 1]]
            order = np.argsort(rows)
            secrets.append(
                SharedSecret(
                    tuple(int(r) for r in rows[order]),
                    math.sqrt(self.variance) * values[order, None],
                )
            )
        return GaussianNoise(self.n, 0.0, tuple(secrets), self.name)

    def agent_sample(self, agent: int, seeds: SeedBook, step: int, dim: int) -> np.ndarray:
        """Agent `agent`'s injection at `step` from the seeds of the draws it takes part in
        (secret c of [`seed_structure`][dpdl.mechanisms.lppa.TrackingNoise.seed_structure] is
        column c)."""
        row = self.spread.getrow(agent)
        noise = np.zeros(dim)
        for c, weight in zip(row.indices, row.data, strict=True):
            noise += weight * self._draws(SeedBook.generator(seeds.secrets[int(c)], step), (dim,))
        return noise

    def covariance(self) -> np.ndarray:
        """Per-coordinate covariance of one injection across agents, `Var(z) M M^T`."""
        return self.variance * (self.spread @ self.spread.T).toarray()

    def unknown_to(self, coalition: Iterable[int]) -> TrackingNoise:
        """The part of the noise `coalition` cannot subtract: the draws none of its members takes
        part in (an LPPA arc is known to its sender and its receiver; a DP draw to its agent)."""
        members = np.zeros(self.n, dtype=bool)
        members[list(coalition)] = True
        touched = np.asarray(abs(self.spread[members]).sum(axis=0)).ravel() > 0
        return replace(self, spread=self.spread[:, ~touched])

    def describe(self) -> dict[str, Any]:
        return {
            "injection": self.name,
            "scale": self.scale,
            "distribution": self.distribution,
            "every_round": self.every_round,
        }


def lppa_noise(
    graph: nx.Graph, scale: float, distribution: str = "laplace", every_round: bool = False
) -> TrackingNoise:
    """LPPA's noise difference (Algorithm 1, lines 4-6): one draw per arc, +1 at its sender, -1 at
    its receiver."""
    n = graph.number_of_nodes()
    return TrackingNoise(
        "lppa", _incidence(n, flow_arcs(graph)), float(scale), distribution, every_round
    )


def dp_noise(
    n: int, scale: float, distribution: str = "laplace", every_round: bool = False
) -> TrackingNoise:
    """The DP baseline of LPPA's Section 6: i.i.d. noise added to every agent's tracking
    variable."""
    return TrackingNoise(
        "dp", sparse.identity(n, format="csr"), float(scale), distribution, every_round
    )


#: Noise injected into gradient tracking, by CLI name.


def build_injection(name: str, graph: nx.Graph, options: TrackingOptions) -> TrackingNoise | None:
    """Injection `name` (one of `INJECTIONS`) for `graph`; None for `"none"`."""
    if name == "lppa":
        return lppa_noise(graph, options.scale, options.distribution, options.every_round)
    if name == "dp":
        return dp_noise(
            graph.number_of_nodes(), options.scale, options.distribution, options.every_round
        )
    if name != "none":
        raise ConfigError(f"gradient tracking injects none, lppa or dp noise, not {name!r}")
    return None


class NoiseFlow(NoiseMechanism):
    """Gaussian LPPA noise per step: `N(0, sigma^2)` per arc, +1 at its sender, -1 at its
    receiver, i.e. `R = sigma^2 B B^T` (singular: epsilon is infinite against an eavesdropper)."""

    name = "lppa"
    default_threat = Eavesdropper()
    calibrated = False

    def __init__(self, graph: nx.Graph, sigma: float) -> None:
        arc_factor = float(sigma) * np.array([[1.0], [-1.0]])
        super().__init__(
            graph.number_of_nodes(),
            0.0,
            [SharedSecret(arc, arc_factor) for arc in flow_arcs(graph)],
        )
        self.sigma = float(sigma)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "sigma2_arc": self.sigma**2}


def design_noise_flow(graph: nx.Graph, calibration: Calibration) -> NoiseFlow:
    """LPPA noise whose every agent's variance matches the calibrated LDP variance or more."""
    return matched_to_ldp(lambda sigma: NoiseFlow(graph, sigma), calibration)
