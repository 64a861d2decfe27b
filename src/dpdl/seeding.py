"""Deterministic randomness: one seed per run, one independent stream per purpose.

`purpose_seed(seed, "noise")` is a `numpy.random.SeedSequence` whose spawn key is derived
from the purpose's name, so streams do not depend on the order in which purposes are requested and
adding a purpose never changes the others. Results are bit-for-bit repeatable from the seed.
"""

from __future__ import annotations

import zlib

import numpy as np

from dpdl.errors import ConfigError

__all__ = ["purpose_rng", "purpose_seed"]


def purpose_seed(seed: int, purpose: str) -> np.random.SeedSequence:
    """Seed sequence for `purpose` (e.g. `"graph"`, `"partition"`, `"batches"`,
    `"noise"`)."""
    if seed < 0:
        raise ConfigError(f"seeds must be integers >= 0, got {seed}")
    return np.random.SeedSequence(seed, spawn_key=(zlib.crc32(purpose.encode()),))


def purpose_rng(seed: int, purpose: str) -> np.random.Generator:
    """A fresh generator for `purpose` under run seed `seed`."""
    return np.random.default_rng(purpose_seed(seed, purpose))
