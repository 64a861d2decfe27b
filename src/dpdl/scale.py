"""How large dpdl goes dense: the size above which n x n matrices give way to sparse ones.

Below :data:`SPARSE_MIN_AGENTS` agents every matrix over agents is a dense numpy array, as the
papers' 20-100 agents need (and every seeded result of that size is unchanged). From it on, the
mixing matrix W is a ``scipy.sparse`` CSR matrix built from the graph's edges, so a D-SGD step
costs O(|E| d) instead of O(n^2 d); spectral facts and mixing validation use sparse eigensolvers;
independent noise is accounted in closed form per agent. Designs that need a dense n x n
covariance (Whisper, CorN-DSGD's multi-seed design) stay dense and check first, with
:func:`require_dense`, that the matrices fit in memory.
"""

from __future__ import annotations

import os

from dpdl.errors import ConfigError

__all__ = ["SPARSE_MIN_AGENTS", "dense_bytes", "require_dense"]

#: From this many agents on, W is held sparse (CSR) and its spectrum found by sparse eigensolvers.
#: A dense 1000 x 1000 float64 matrix is 8 MB and its eigendecomposition about a second: below,
#: dense is as fast and keeps seeded results bit for bit.
SPARSE_MIN_AGENTS = 1000


def dense_bytes(n: int, matrices: int = 1) -> int:
    """Bytes of ``matrices`` dense float64 n x n matrices."""
    return 8 * n * n * matrices


def _available_bytes() -> int | None:
    """Physical memory of this machine, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def require_dense(n: int, what: str, matrices: int) -> None:
    """Raise a :class:`ConfigError` naming ``n`` and the bytes needed, before anything is
    allocated, when ``matrices`` dense n x n float64 matrices (what the design ``what`` holds at
    once) exceed half of this machine's memory."""
    needed, available = dense_bytes(n, matrices), _available_bytes()
    if available is not None and needed > available // 2:
        raise ConfigError(
            f"{what} is dense: at n = {n} agents it needs about {needed:,} bytes "
            f"({needed / 2**30:.1f} GiB: {matrices} matrices of {n} x {n} float64), more than half "
            f"of this machine's {available / 2**30:.1f} GiB; use a mechanism accounted in closed "
            "form at any n (ldp, cdp) or fewer agents"
        )
