"""The a9a data set (LIBSVM binarisation of UCI Adult), bundled with the package.

Platt (1998); LIBSVM data page (Chang & Lin, 2011). 32561 + 16281 rows, 123 binary features, labels
in {-1, +1}. The two original files are concatenated (48842 rows) so that callers can draw their own
train/test split, as in the Whisper D-SGD experiments (80/20).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from sklearn.datasets import load_svmlight_file

from dpdl.data.paths import bundled_file

__all__ = ["N_FEATURES", "load_a9a"]

N_FEATURES = 123


@lru_cache(maxsize=1)
def _load() -> tuple[np.ndarray, np.ndarray]:
    parts = [
        load_svmlight_file(str(bundled_file(f"a9a/{name}")), n_features=N_FEATURES)
        for name in ("a9a.gz", "a9a.t.gz")
    ]
    features = np.vstack([x.toarray() for x, _ in parts])
    labels = np.concatenate([y for _, y in parts])
    features.setflags(write=False)
    labels.setflags(write=False)
    return features, labels


def load_a9a() -> tuple[np.ndarray, np.ndarray]:
    """All 48842 rows of a9a as dense `(features (m, 123) float64, labels (m,) in {-1, +1})`.

    The arrays are cached and read-only; copy them before changing them.
    """
    return _load()
