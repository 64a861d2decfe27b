"""The engines' operands on the compute device: the mixing matrix (dense, or CSR from
`SPARSE_MIN_AGENTS` agents on, so a gossip round costs O(|E| d)) and each step's
host draws.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from scipy import sparse

__all__ = ["mixing_operator", "to_device"]


def mixing_operator(weights: np.ndarray | sparse.sparray, device: torch.device) -> torch.Tensor:
    """`weights` as a float64 tensor on `device`: dense stays dense; a scipy sparse matrix
    becomes a sparse CSR tensor (its structure was checked by
    [`validate_mixing_matrix`][dpdl.graphs.mixing.validate_mixing_matrix])."""
    if not sparse.issparse(weights):
        return torch.as_tensor(np.asarray(weights, dtype=float), device=device)
    csr = sparse.csr_array(weights)
    csr.sort_indices()
    # torch calls its sparse CSR layout "beta" in a warning; matmul is all the engines use
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            torch.as_tensor(csr.indptr, dtype=torch.int64),
            torch.as_tensor(csr.indices, dtype=torch.int64),
            torch.as_tensor(csr.data, dtype=torch.float64),
            size=csr.shape,
            device=device,
            check_invariants=False,
        )


def to_device(values: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host draw (noise, injection) as a float64 tensor on `device`: shared memory on the CPU,
    one asynchronous copy to a GPU (nothing comes back to the host)."""
    host = torch.from_numpy(np.ascontiguousarray(values, dtype=float))
    if device.type == "cpu":
        return host
    return host.pin_memory().to(device, non_blocking=True)
