"""A noise mechanism defined outside dpdl, registered, and used from the Python API and the CLI.

``tree-pairwise``: every agent adds private Gaussian noise of variance ``sigma^2``, and every edge
``(i, j)`` of a breadth-first spanning tree of the graph carries one pairwise-cancelling secret,
``+s z_ij`` at i and ``-s z_ij`` at j with ``s^2 = RATIO sigma^2`` (DECOR's construction on a tree
rather than on every edge): ``R = sigma^2 I + s^2 L_tree``. The secrets cancel in the network
average; the eavesdropper, who sees every message but holds no seed, faces all of R. It is a
:class:`~dpdl.mechanisms.base.NoiseMechanism` (private variances plus shared secrets), so dpdl's
exact accountant applies to it unchanged, and it is calibrated by
:func:`~dpdl.accounting.calibration.noise_scale` against the threat ``--threat`` names
(the eavesdropper by default).

Run as a script, it designs the mechanism for a ring of 6 agents, accounts it and trains a few
D-SGD steps through the Python API::

    python examples/custom_mechanism.py

As a plugin, the same file adds the mechanism to the command line (``dpdl train --help`` lists
it)::

    DPDL_PLUGINS=examples/custom_mechanism.py dpdl train --mechanism tree-pairwise \\
        --task quadratic --graph ring --n 6 --steps 20 --out DIR
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from dpdl.accounting.calibration import Calibration, noise_scale
from dpdl.choices import MECHANISM_REGISTRY
from dpdl.mechanisms.base import NoiseMechanism, SharedSecret
from dpdl.settings import DesignOptions
from dpdl.threats import threat_by_name

NAME = "tree-pairwise"

#: Variance of each tree edge's secret, relative to the private variance.
RATIO = 4.0

_PAIR = np.array([[1.0], [-1.0]])


class TreePairwise(NoiseMechanism):
    """``R = sigma^2 I + s^2 L_tree``: private noise plus one cancelling secret per tree edge."""

    name = NAME

    def __init__(self, graph: nx.Graph, sigma: float, sigma_edge: float) -> None:
        root = min(graph.nodes)
        edges = sorted((min(u, v), max(u, v)) for u, v in nx.bfs_edges(graph, root))
        super().__init__(
            graph.number_of_nodes(),
            sigma**2,
            [SharedSecret((u, v), sigma_edge * _PAIR) for u, v in edges],
        )
        self.sigma, self.sigma_edge = float(sigma), float(sigma_edge)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "sigma2": self.sigma**2, "sigma_edge2": self.sigma_edge**2}


@MECHANISM_REGISTRY.register(NAME, help="private noise plus cancelling noise on a spanning tree")
def build_tree_pairwise(
    graph: nx.Graph, weights: np.ndarray, calibration: Calibration, options: DesignOptions
) -> TreePairwise:
    """The design calibrated to ``calibration`` against ``options.threat``: the unit design
    (``sigma = 1``) scaled until the accountant confirms the budget."""
    threat = threat_by_name(options.threat)
    unit = TreePairwise(graph, 1.0, math.sqrt(RATIO))
    scale = noise_scale(unit, threat, calibration)
    mechanism = TreePairwise(graph, scale, scale * math.sqrt(RATIO))
    mechanism.default_threat = threat
    return mechanism


def main() -> None:
    """Design, account and train through the Python API; print the guarantee and the loss."""
    from dpdl.accounting import AgentLevel, account, calibrate
    from dpdl.graphs import build_graph, mixing_matrix
    from dpdl.mechanisms.registry import build_mechanism
    from dpdl.simulation import DSGDConfig, StepSize, run_dsgd
    from dpdl.tasks import build_task

    eps, delta, steps, clip = 5.0, 1e-5, 50, 1.0
    graph = build_graph("ring", 6)
    weights = mixing_matrix(graph)
    neighbouring = AgentLevel(clip)
    calibration = calibrate(eps, delta, steps, neighbouring)
    mechanism = build_mechanism(NAME, graph, weights, calibration)  # through the registry
    report = account(mechanism, mechanism.default_threat, neighbouring, steps, delta)
    assert report.epsilon <= eps, report
    task = build_task("quadratic", 6)
    config = DSGDConfig(steps=steps, step_size=StepSize(1e-2, "inv-sqrt"), clip=clip)
    result = run_dsgd(task, weights, mechanism, config, seed=0)
    print(f"mechanism: {mechanism.name} {mechanism.describe()}")
    print(f"privacy: {report}")
    print(f"Tr(W R W^T): {mechanism.variance_after_mixing(weights):.6g}")
    print(f"final: {result.history[-1]}")


if __name__ == "__main__":
    main()
