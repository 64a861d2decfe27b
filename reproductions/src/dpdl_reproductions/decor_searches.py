"""The ways DECOR's experiments pick a noise couple that the library does not offer as a method:
``appendix-d-<k>``, the k-th couple of DECOR's Appendix D.1 search, over which its Appendix D.2
tunes (registered in :data:`dpdl.choices.DECOR_SEARCH_REGISTRY` by
:mod:`~dpdl_reproductions.plugin`; decor-fig1's grids tune over ``trace`` and these).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy import sparse

from dpdl.accounting.calibration import Calibration
from dpdl.errors import ConfigError
from dpdl.mechanisms.decor import Decor, appendix_d_couples
from dpdl.threats import ThreatModel

__all__ = ["appendix_d_couple"]


def appendix_d_couple(
    graph: nx.Graph,
    weights: np.ndarray | sparse.sparray,
    calibration: Calibration,
    threat: ThreatModel | None,
    objective: np.ndarray | None,
    k: str,
) -> Decor:
    """DECOR search ``appendix-d-<k>``: the k-th couple of
    :func:`dpdl.mechanisms.decor.appendix_d_couples` (0 = the least private noise sigma_pair), as
    DECOR's Appendix D.2 tunes over them; ``weights`` and ``objective`` are not read (the couple is
    chosen by its place, not by a variance)."""
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
