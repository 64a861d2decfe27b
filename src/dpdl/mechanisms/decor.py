"""DECOR: pairwise-cancelling correlated noise (Allouah et al., ICML 2024, Algorithm 1).

Agent i adds `u_i + sum_{j in N_i} v_ij` with `u_i ~ N(0, sigma_pair^2)` private and `v_ij = -v_ji ~
N(0, sigma_cor^2)` from a seed shared by the edge's endpoints, so `R = sigma_pair^2 I + sigma_cor^2
L` (CorN-DSGD Section III, item 2). Against a coalition I the unknown covariance on the honest
agents H is `sigma_pair^2 I + sigma_cor^2 L(G_H)` (DECOR Theorem 6, Algorithm 3), which
[`unknown_covariance`][dpdl.mechanisms.base.NoiseMechanism.unknown_covariance] reproduces from the
edge secrets.

Two ways to pick (sigma_pair, sigma_cor) for a budget:

- [`design_decor`][dpdl.mechanisms.decor.design_decor] (default): minimise `Tr(W R W^T)` under the
  privacy constraint, the comparison the Whisper / CorN-DSGD papers make, or `Tr(M R)` for a weight
  M (the loss the noise leaves after the whole run,
  [`dpdl.mechanisms.horizon`][dpdl.mechanisms.horizon]). With `t = sigma_cor^2 / sigma_pair^2` the
  constraint fixes `sigma_pair^2(t)` (sensitivity scales as 1/sigma), leaving a 1-d search over t.
- [`appendix_d_couples`][dpdl.mechanisms.decor.appendix_d_couples]: DECOR's Appendix D.1 search: fix
  sigma_pair on a grid between the CDP and LDP noise levels, and bisect sigma_cor to meet the
  per-step budget; [`best_couple`][dpdl.mechanisms.decor.best_couple] picks the couple of least
  `Tr(W R W^T)` (or `Tr(M R)`) among them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
from scipy import sparse
from scipy.optimize import minimize_scalar

from dpdl.accounting.accountant import step_sensitivity
from dpdl.accounting.calibration import Calibration, safe_scale
from dpdl.accounting.search import geometric_bisect
from dpdl.errors import ConfigError, PrivacyParameterError
from dpdl.mechanisms.base import NoiseMechanism, SharedSecret
from dpdl.scale import SPARSE_MIN_AGENTS, require_dense
from dpdl.threats import Eavesdropper, ThreatModel

__all__ = ["Decor", "appendix_d_couples", "appendix_d_search", "best_couple", "design_decor"]

_PAIR = np.array([[1.0], [-1.0]])

#: From this many agents on, a design's search against the eavesdropper reads one
#: eigendecomposition of the Laplacian (:func:`_spectral_units`) where each of its 40-odd steps
#: was a certified accounting of an n-row factor (14 s a step on the SNAP Facebook graph of 4,039
#: agents); below, the steps are the accountant's as before, and so is every design.
SPECTRAL_MIN_AGENTS = SPARSE_MIN_AGENTS
#: The relative margin by which ``Tr(W L W^T)`` must exceed ``d_min Tr(W W^T)`` for LDP to be
#: taken without a search (:func:`_ldp_is_best`): at t = 1e-6, the search's lower end, the cost
#: is then above LDP's by about 1e-9 relative, well beyond the certified values' rounding.
LDP_MARGIN = 1e-3
#: safe_scale's first relative step, by which a certified estimate is raised
#: (:func:`_certified_scale`).
SAFE_SCALE_STEP = 1e-12


class Decor(NoiseMechanism):
    """`R = sigma_pair^2 I + sigma_cor^2 L`: private noise plus one secret per edge, none where
    `sigma_cor = 0` (LDP, what the design picks when no correlation helps: as Whisper holds no
    secret without excess, the agents then agree on no seed, and no draw is spent on zeros)."""

    name = "decor"
    default_threat = Eavesdropper()

    def __init__(
        self,
        graph: nx.Graph,
        sigma_pair: float,
        sigma_cor: float,
        threat: ThreatModel | None = None,
    ) -> None:
        factor = sigma_cor * _PAIR
        factor.flags.writeable = False  # one array for every edge's secret
        super().__init__(
            graph.number_of_nodes(),
            sigma_pair**2,
            [SharedSecret(edge, factor) for edge in _sorted_edges(graph)] if sigma_cor else [],
        )
        self.sigma_pair = float(sigma_pair)
        self.sigma_cor = float(sigma_cor)
        if threat is not None:
            self.default_threat = threat

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "sigma_pair2": self.sigma_pair**2,
            "sigma_cor2": self.sigma_cor**2,
        }


def _sorted_edges(graph: nx.Graph) -> list[tuple[int, int]]:
    """The graph's edges as `(u, v)` with `u <= v`, in lexicographic order (one secret each)."""
    pairs = np.sort(np.array(list(graph.edges()), dtype=int).reshape(-1, 2), axis=1)
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    return list(map(tuple, pairs.tolist()))


def _pair_scale(
    graph: nx.Graph, ratio: float, threat: ThreatModel, calibration: Calibration
) -> float:
    """sigma_pair such that `sigma_pair^2 (I + ratio L)` meets the calibration against
    `threat`."""
    unit = step_sensitivity(  # a search step: the final scale is certified by safe_scale
        Decor(graph, 1.0, math.sqrt(ratio)), threat, calibration.neighbouring, simulated=False
    )
    if math.isinf(unit):
        raise PrivacyParameterError(
            f"DECOR noise gives no privacy against the {threat} threat on this graph"
        )
    return unit / calibration.mu_step


def _sees_every_message(threat: ThreatModel) -> bool:
    """Whether `threat` observes each honest agent's message on its own (the identity view)."""
    return type(threat).view is ThreatModel.view


def _spectral_units(graph: nx.Graph) -> Callable[[float], float]:
    """The eavesdropper's unit sensitivity of `I + t L` as a function of t, from one
    eigendecomposition `L = V diag(lambda) V^T`: `max_i sum_k V_ik^2 / (1 + t lambda_k)`
    (`[(I + t L)^-1]_ii`, DECOR Theorem 1's quantity), `n^2` operations a value where the
    accountant's certified value of a design costs `n^3`. A search's estimate: the design found
    is certified by the accountant (`_certified_scale`)."""
    n = graph.number_of_nodes()

    @functools.cache
    def spectrum() -> tuple[np.ndarray, np.ndarray]:  # taken at the first t > 0
        require_dense(n, "DECOR's design search (an eigendecomposition of L)", matrices=5)
        laplacian = nx.laplacian_matrix(graph, nodelist=range(n)).toarray().astype(float)
        values, vectors = np.linalg.eigh(laplacian)
        del laplacian
        # L is positive semidefinite (rounding may say -1e-13); V_ik^2 in place of V.
        return np.maximum(values, 0.0), np.square(vectors, out=vectors)

    def unit(ratio: float) -> float:
        if ratio == 0.0:
            return 1.0
        values, weights = spectrum()
        return math.sqrt(float((weights @ (1.0 / (1.0 + ratio * values))).max()))

    return unit


def _scales(
    graph: nx.Graph, threat: ThreatModel, calibration: Calibration
) -> tuple[Callable[[float], float], bool]:
    """sigma_pair as a function of the ratio t for the search (`_pair_scale`), and whether
    its values are estimates to certify: from `SPECTRAL_MIN_AGENTS` agents on, against a
    threat of one empty coalition that sees every message (the eavesdropper), one
    eigendecomposition serves every step (`_spectral_units`); otherwise each step is the
    accountant's certified value, as it always was (and every such design is unchanged)."""
    n = graph.number_of_nodes()
    spectral = (
        n >= SPECTRAL_MIN_AGENTS
        and _sees_every_message(threat)
        and threat.coalition_count(n) == 1
        and next(iter(threat.coalitions(n))) == ()
    )
    if not spectral:
        return lambda ratio: _pair_scale(graph, ratio, threat, calibration), False
    unit = _spectral_units(graph)
    per_unit = calibration.neighbouring.sensitivity / calibration.mu_step
    return lambda ratio: unit(ratio) * per_unit, True


def _ldp_is_best(graph: nx.Graph, threat: ThreatModel, base: float, extra: float) -> bool:
    """Whether no ratio t > 0 can beat t = 0, by Cauchy-Schwarz: `[A^-1]_ii >= 1 / A_ii`, so an
    agent of least degree d keeps `[(I + t L_H)^-1]_ii >= 1 / (1 + t d)` whatever a coalition
    subtracts (it only removes edges), and the cost `sigma_pair^2(t) (base + t extra)` is at
    least `sigma_pair^2(0) (base + t extra) / (1 + t d)`, which is at least its value at 0 when
    `extra >= d base`. Taken with a margin (`LDP_MARGIN`), so that a search would have
    chosen t = 0 as well; for threats seeing every message only."""
    degrees = [degree for _, degree in graph.degree()]
    least = min(degrees, default=0)
    return (
        _sees_every_message(threat)
        and least >= 1
        and base > 0.0
        and extra >= (1.0 + LDP_MARGIN) * least * base
    )


def _traces(
    graph: nx.Graph, weights: np.ndarray | sparse.csr_array, objective: np.ndarray | None
) -> tuple[float, float]:
    """`Tr(W W^T)` and `Tr(W L W^T)` (with M: `Tr(M)` and `Tr(M L)`); from sparse products
    for a sparse W (large graphs), without an n x n matrix."""
    laplacian = nx.laplacian_matrix(graph, nodelist=range(graph.number_of_nodes())).astype(float)
    if objective is not None:
        return float(np.trace(objective)), float(np.sum(objective * laplacian.toarray()))
    if sparse.issparse(weights):
        base = float(weights.multiply(weights).sum())
        return base, float(sparse.csr_array(weights @ laplacian).multiply(weights).sum())
    laplacian = laplacian.toarray()
    return float(np.sum(weights * weights)), float(np.sum((weights @ laplacian) * weights))


def _best_ratio(
    graph: nx.Graph,
    threat: ThreatModel,
    base: float,
    extra: float,
    scale: Callable[[float], float],
) -> float:
    """The ratio t of least cost `scale(t)^2 (base + t extra)`: 0 where `_ldp_is_best`
    proves it, else the bounded Brent search over `log10 t` in [-6, 6], compared with t = 0."""
    if _ldp_is_best(graph, threat, base, extra):
        return 0.0

    def cost(log_ratio: float) -> float:
        ratio = 10.0**log_ratio
        return scale(ratio) ** 2 * (base + ratio * extra)

    best = minimize_scalar(cost, bounds=(-6.0, 6.0), method="bounded", options={"xatol": 1e-6})
    return 10.0**best.x if best.fun < scale(0.0) ** 2 * base else 0.0


def _certified_scale(
    build: Callable[[float], Decor], threat: ThreatModel, calibration: Calibration, scale: float
) -> float:
    """`scale` (a search's estimate of the exact value) moved onto the accountant's certified
    value, which lies above the exact one by its rounding bound: one certified account of
    `build(scale)`, the sensitivity scaling as `1 / sigma`, a relative
    `SAFE_SCALE_STEP` above so that [`safe_scale`][dpdl.accounting.calibration.safe_scale] (which
    checks it) need not step up from it."""
    certified = step_sensitivity(build(scale), threat, calibration.neighbouring)
    if math.isinf(certified):
        return scale  # safe_scale says why no scale would do
    return scale * certified / calibration.mu_step * (1.0 + SAFE_SCALE_STEP)


def design_decor(
    graph: nx.Graph,
    weights: np.ndarray | sparse.csr_array,
    calibration: Calibration,
    threat: ThreatModel | None = None,
    objective: np.ndarray | None = None,
) -> Decor:
    """DECOR noise minimising `Tr(W R W^T)` under the calibrated constraint against `threat`,
    or `Tr(M R)` for `M = objective`.

    `Tr(W R W^T) = sigma_pair^2(t) (Tr(W W^T) + t Tr(W L W^T))` (with M:
    `sigma_pair^2(t) (Tr(M) + t Tr(M L))`); the search is over `log10 t` in [-6, 6] (bounded
    Brent), compared with t = 0 (which is LDP), unless a bound proves t = 0 best
    (`_ldp_is_best`). Its steps are the accountant's certified values, or, on a large graph
    against the eavesdropper, one eigendecomposition's (`_scales`), the design found then
    certified once (`_certified_scale`); [`safe_scale`][dpdl.accounting.calibration.safe_scale]
    checks the final scale either way.
    """
    threat = threat or Eavesdropper()
    base, extra = _traces(graph, weights, objective)
    scale, estimated = _scales(graph, threat, calibration)
    ratio = _best_ratio(graph, threat, base, extra, scale)

    def build(sigma_pair: float) -> Decor:
        return Decor(graph, sigma_pair, sigma_pair * math.sqrt(ratio), threat)

    start = scale(ratio)
    if estimated:
        start = _certified_scale(build, threat, calibration, start)
    return build(safe_scale(build, threat, calibration, start))


def appendix_d_couples(
    graph: nx.Graph, calibration: Calibration, threat: ThreatModel | None = None, grid: int = 3
) -> list[Decor]:
    """DECOR Appendix D.1: for sigma_pair on a grid of `grid` points between the CDP level
    `s / (sqrt(n) mu_step)` and the LDP level `s / mu_step`, the smallest sigma_cor meeting the
    budget (bisection in log space; the per-step budget is monotone in sigma_cor). Grid points
    where even a huge sigma_cor cannot meet the budget are skipped.
    """
    threat = threat or Eavesdropper()
    n = graph.number_of_nodes()
    ldp = calibration.neighbouring.sensitivity / calibration.mu_step
    couples = []
    for sigma_pair in np.geomspace(ldp / math.sqrt(n), ldp, grid + 2)[1:-1]:

        def meets(sigma_cor: float, pair: float = sigma_pair) -> bool:
            noise = Decor(graph, pair, sigma_cor)
            return (
                step_sensitivity(noise, threat, calibration.neighbouring, simulated=False)
                <= calibration.mu_step
            )

        high = 1e3 * ldp
        if not meets(high):
            continue
        _, high = geometric_bisect(meets, 1e-6 * ldp, high, 1e-9)
        couples.append(Decor(graph, sigma_pair, high, threat))
    return couples


def appendix_d_search(
    graph: nx.Graph,
    weights: np.ndarray | sparse.sparray,
    calibration: Calibration,
    threat: ThreatModel | None = None,
    objective: np.ndarray | None = None,
) -> Decor:
    """DECOR search `appendix-d`: the couple of
    [`appendix_d_couples`][dpdl.mechanisms.decor.appendix_d_couples] of least `Tr(W R W^T)` (or
    `Tr(M R)` for `M = objective`, [`best_couple`][dpdl.mechanisms.decor.best_couple])."""
    couples = appendix_d_couples(graph, calibration, threat)
    if not couples:
        raise ConfigError(
            "DECOR's Appendix D search found no noise couple meeting the budget on this graph"
        )
    return best_couple(couples, weights, objective)


def best_couple(
    couples: list[Decor], weights: np.ndarray | sparse.sparray, objective: np.ndarray | None = None
) -> Decor:
    """The couple of least `Tr(W R W^T)`, or of least `Tr(M R)` for `M = objective`."""
    if objective is None:
        return min(couples, key=lambda m: m.variance_after_mixing(weights))
    return min(couples, key=lambda m: float(np.sum(objective * m.covariance())))
