"""The ways DECOR's experiments pick a noise couple that the library does not offer as a method,
registered in `dpdl.choices.DECOR_SEARCH_REGISTRY` by `plugin`:

- `appendix-d-<k>`: the k-th couple of DECOR's Appendix D.1 search, over which its Appendix D.2
  tunes (decor-fig1's grids tune over `trace` and these);
- `authors-<k>`: the couple of the k-th private noise of the grid the authors' released code
  searches for its least squares (elfirdoussilab1/DECOR, `utils/plotting.py`:
  `find_best_params` and `find_sigma_cor`), with its tolerance: a couple its bisection keeps
  may be above the calibration's target, and a run of it reports the epsilon it really has.

The authors' search, for a per-round target `eps_iter` (their `reverse_eps`: with dpdl's
calibration `authors`, the one their code solves), clipping threshold C and n agents:
sigma_ldp = C sqrt(2 / eps_iter), sigma_cdp = sigma_ldp / sqrt(n); for each sigma of
`linspace(sigma_cdp, sigma_ldp, 50)`, a bisection over sigma_cor in `linspace(1, 1000, 1000)`
for `rdp_account(sigma, sigma_cor) = 2 C^2 max_i [Sigma^-1]_ii` (Sigma = sigma^2 I + sigma_cor^2
L, `utils/dp_account.py`) in `(eps_iter, eps_iter + 1e-4]`. It gives up (no couple) when even
sigma_cor = 1000 leaves `rdp_account` above the target, and where the grid runs down to one
point it keeps that point whatever its value. The code then runs every couple found once and
keeps the one of least loss, which decor-fig1's authors' grids do by tuning over `authors-<k>`.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy import sparse

from dpdl.accounting.calibration import Calibration
from dpdl.accounting.neighbouring import AgentLevel
from dpdl.errors import ConfigError
from dpdl.mechanisms.decor import Decor, appendix_d_couples
from dpdl.threats import ThreatModel

__all__ = ["AUTHORS_GRID", "NoCouple", "appendix_d_couple", "authors_couple", "authors_eps_iter"]


class NoCouple(ConfigError):
    """The authors' search finds no couple at this place of its grid (their code skips it)."""


#: The authors' grid of private noise sigma (points from sigma_cdp to sigma_ldp), of correlated
#: noise sigma_cor (``linspace(1, 1000, 1000)``), and the bisection's tolerance above the target.
AUTHORS_GRID = {"sigma": 50, "sigma_cor": np.linspace(1.0, 1000.0, 1000), "tolerance": 1e-4}


def appendix_d_couple(
    graph: nx.Graph,
    weights: np.ndarray | sparse.sparray,
    calibration: Calibration,
    threat: ThreatModel | None,
    objective: np.ndarray | None,
    k: str,
) -> Decor:
    """DECOR search `appendix-d-<k>`: the k-th couple of
    [`dpdl.mechanisms.decor.appendix_d_couples`][dpdl.mechanisms.decor.appendix_d_couples] (0 =
    the least private noise sigma_pair), as DECOR's Appendix D.2 tunes over them; `weights` and
    `objective` are not read (the couple is chosen by its place, not by a variance)."""
    if not k.isdigit():
        raise ConfigError(
            f"DECOR search appendix-d-{k}: the couple's place is a number from 0, not {k!r}"
        )
    couples = appendix_d_couples(graph, calibration, threat)
    if int(k) >= len(couples):
        raise ConfigError(
            f"DECOR couple {k} asked for, but the Appendix D search found {len(couples)} on this "
            "graph"
        )
    return couples[int(k)]


def authors_eps_iter(graph: nx.Graph, sigma: float, sigma_cor: float, clip: float) -> float:
    """The authors' per-round privacy `rdp_account(sigma, sigma_cor, clip, D, A)`:
    `2 C^2 max_i [Sigma^-1]_ii` for `Sigma = sigma^2 I + sigma_cor^2 L` (DECOR Algorithm 2,
    order-1 RDP of one round at replace-one sensitivity 2C, as their code computes it)."""
    return _eps_iter(_laplacian(graph), sigma, sigma_cor, clip)


def _laplacian(graph: nx.Graph) -> np.ndarray:
    """The graph's Laplacian D - A, dense, in float64 (as the code's `degree_matrix -
    adjacency_matrix`)."""
    return (
        nx.laplacian_matrix(graph, nodelist=range(graph.number_of_nodes())).toarray().astype(float)
    )


def _eps_iter(laplacian: np.ndarray, sigma: float, sigma_cor: float, clip: float) -> float:
    """`authors_eps_iter` of the graph of Laplacian `laplacian`."""
    covariance = sigma**2 * np.eye(len(laplacian)) + sigma_cor**2 * laplacian
    return 2.0 * clip**2 * float(np.diag(np.linalg.inv(covariance)).max())


def _authors_sigma_cor(
    laplacian: np.ndarray, sigma: float, grid: np.ndarray, clip: float, target: float
) -> float | None:
    """`find_sigma_cor` of the authors' code, step for step: the sigma_cor its bisection of
    `grid` keeps for private noise `sigma` and per-round target `target` on the graph of
    Laplacian `laplacian`, or None where it finds none."""
    while len(grid) > 1:
        if _eps_iter(laplacian, sigma, grid[-1], clip) > target:
            return None  # no hope: the privacy does not improve with sigma_cor
        middle = grid[len(grid) // 2]
        eps = _eps_iter(laplacian, sigma, middle, clip)
        if eps - target < AUTHORS_GRID["tolerance"] and eps > target:  # the code's test
            return float(middle)
        grid = grid[len(grid) // 2 :] if eps > target else grid[: len(grid) // 2]
    return float(grid[0]) if len(grid) == 1 else None


def authors_couple(
    graph: nx.Graph,
    weights: np.ndarray | sparse.sparray,
    calibration: Calibration,
    threat: ThreatModel | None,
    objective: np.ndarray | None,
    k: str,
) -> Decor:
    """DECOR search `authors-<k>`: the couple the authors' search (module docstring) finds for
    the k-th sigma of its grid, its per-round target `mu_step^2 / 2` (what their code's
    `reverse_eps` gives for the calibration `authors`). Agent level only, as their least
    squares; `weights` and `objective` are not read (the code picks among the couples by
    loss)."""
    if not isinstance(calibration.neighbouring, AgentLevel):
        raise ConfigError(
            f"DECOR search authors-{k}: the authors' search is their least squares', at agent "
            f"level; this calibration is {calibration.neighbouring}"
        )
    if not k.isdigit() or int(k) >= AUTHORS_GRID["sigma"]:
        raise ConfigError(
            f"DECOR search authors-{k}: the place of the private noise in the authors' grid is a "
            f"number from 0 to {AUTHORS_GRID['sigma'] - 1}, not {k!r}"
        )
    clip = calibration.neighbouring.clip
    target = calibration.mu_step**2 / 2.0
    sigma_ldp = clip * np.sqrt(2.0 / target)
    n = graph.number_of_nodes()
    sigmas = np.linspace(sigma_ldp / np.sqrt(n), sigma_ldp, AUTHORS_GRID["sigma"])
    sigma = float(sigmas[int(k)])
    sigma_cor = _authors_sigma_cor(
        _laplacian(graph), sigma, AUTHORS_GRID["sigma_cor"], clip, target
    )
    if sigma_cor is None:
        raise NoCouple(
            f"DECOR search authors-{k}: the authors' search finds no sigma_cor for sigma = "
            f"{sigma:.6g} on this graph (even 1000 leaves the round above its target)"
        )
    return Decor(graph, sigma, sigma_cor, threat)
