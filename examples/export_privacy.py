"""Export a view's privacy loss to dp_accounting: compose dpdl's guarantee with other releases.

DECOR's noise on a ring of 8 agents is calibrated so that 500 D-SGD steps are (eps, delta) =
(4, 1e-5)-DP at the agent level against an eavesdropper. Each threat's view leaves dpdl as one
dp_accounting `DpEvent` (a Gaussian of noise multiplier `1 / mu_step`, self-composed over the
steps: the whitened view, never one event per coordinate), which dp_accounting then composes with
a release of its own; as a privacy loss distribution (pessimistic, discretised at 1e-4); and as
the f-DP trade-off curve. Last, the pitfall google/differential-privacy PR #430 names: scalar
events per coordinate of a correlated release underestimate its privacy loss. Run it (about 15
s)::

    python examples/export_privacy.py
"""

from __future__ import annotations

import math
import re

import dp_accounting
import networkx as nx
import numpy as np

import dpdl
from dpdl.accounting import (
    AgentLevel,
    ExampleLevel,
    account,
    dp_event,
    gaussian_view,
    gdp,
    pair_view,
    privacy_loss_distribution,
    tradeoff,
    view_of,
)
from dpdl.threats import Colluding, Eavesdropper

DELTA, STEPS = 1e-5, 500


def shown(event: dp_accounting.DpEvent) -> str:
    """The event, its numbers to 6 significant digits."""
    return re.sub(r"\d+\.\d+", lambda number: f"{float(number.group()):.6g}", str(event))


mechanism, weights, reports = dpdl.design_noise(
    nx.cycle_graph(8), "decor", 4.0, DELTA, STEPS, AgentLevel(1.0),
    threats=["eavesdropper", "honest-but-curious"],
)  # fmt: skip

print("Each threat's view, exported:")
for report in reports:
    view = view_of(reports, report.threat)
    pld_eps = privacy_loss_distribution(view).get_epsilon_for_delta(DELTA)
    print(f"  {report.threat}: mu = {view.mu:.4f}, dpdl eps = {report.epsilon:.4f}, PLD eps = "
          f"{pld_eps:.4f}")  # fmt: skip
    print(f"    {shown(dp_event(view))}")

# A second release on the same data: a Gaussian mechanism of noise multiplier 2.
curious = view_of(reports, "honest-but-curious")
accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
accountant.compose(dp_event(curious))
accountant.compose(dp_accounting.GaussianDpEvent(2.0))
exact = gdp.epsilon(math.sqrt(curious.mu**2 + 0.5**2), DELTA)
print(f"\nWith a Gaussian release of noise multiplier 2: dp_accounting eps = "
      f"{accountant.get_epsilon(DELTA):.4f}, dpdl's GDP composition eps = {exact:.4f}")  # fmt: skip

curve = tradeoff(curious)
alphas = np.array([0.01, 0.05, 0.1])
betas = ", ".join(f"beta({a:g}) = {b:.4f}" for a, b in zip(alphas, curve(alphas), strict=True))
print(f"f-DP of the curious agent's view (mu = {curve.mu:.4f}): {betas}")

print("\nWhat curious agent 0 learns about each other agent (mu over the run):")
for agent in range(1, 5):
    view = pair_view(mechanism, Colluding(1), AgentLevel(1.0), STEPS, (0,), agent)
    print(f"  agent {agent}: mu = {view.mu:.4f}")

example = account(mechanism, Eavesdropper(), ExampleLevel(1.0, 16, 0.05), STEPS, DELTA)
print(f"\nExample level (Poisson rate 0.05): eps = {example.epsilon:.4f}")
print(f"  {shown(dp_event(view_of(example)))}")

# The pitfall: a 2-output release, mean shift (1, 1), unit variances of correlation -0.9.
shift, covariance = np.array([1.0, 1.0]), np.array([[1.0, -0.9], [-0.9, 1.0]])
per_coordinate = dp_accounting.pld.PLDAccountant()
for k in range(2):
    per_coordinate.compose(dp_accounting.GaussianDpEvent(math.sqrt(covariance[k, k]) / shift[k]))
whitened = gaussian_view(shift, covariance)
print(f"\nCorrelated 2-output release: per-coordinate scalar events eps = "
      f"{per_coordinate.get_epsilon(DELTA):.2f}; whitened (mu = {whitened.mu:.4f}) eps = "
      f"{whitened.epsilon(DELTA):.2f}")  # fmt: skip
