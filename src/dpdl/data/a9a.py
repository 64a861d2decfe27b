"""The a9a data set (LIBSVM binarisation of UCI Adult), bundled with the package.

Platt (1998); LIBSVM data page (Chang & Lin, 2011). 32561 + 16281 rows, 123 binary features, labels
in {-1, +1}. The two original files are concatenated (48842 rows) so that callers can draw their own
train/test split, as in the Whisper D-SGD experiments (80/20).
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file

from dpdl.data.checks import require_finite, require_labels
from dpdl.data.paths import bundled_file
from dpdl.errors import DataError

__all__ = ["N_FEATURES", "load_a9a", "read_libsvm"]

N_FEATURES = 123


def read_libsvm(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One a9a file in LIBSVM format as dense `(features (m, 123), labels (m,))`, checked: every
    row parses, its feature indices are in 1..123, its values are finite and its label is -1 or
    +1 (one [`DataError`][dpdl.errors.DataError] naming the file, the row and the problem)."""
    try:
        features, labels = load_svmlight_file(str(path), n_features=N_FEATURES)
    except (ValueError, OSError, EOFError, zlib.error) as error:
        raise DataError(f"{path}: not an a9a file in LIBSVM format ({error})") from None
    dense = features.toarray()
    if len(dense) == 0:
        raise DataError(f"{path} holds no rows")
    require_finite(labels, str(path))
    require_labels(labels, (-1, 1), str(path))
    require_finite(dense, str(path), [f"feature {k}" for k in range(1, N_FEATURES + 1)])
    return dense, labels


@lru_cache(maxsize=1)
def _load() -> tuple[np.ndarray, np.ndarray]:
    parts = [read_libsvm(bundled_file(f"a9a/{name}")) for name in ("a9a.gz", "a9a.t.gz")]
    features = np.vstack([x for x, _ in parts])
    labels = np.concatenate([y for _, y in parts])
    features.setflags(write=False)
    labels.setflags(write=False)
    return features, labels


def load_a9a() -> tuple[np.ndarray, np.ndarray]:
    """All 48842 rows of a9a as dense `(features (m, 123) float64, labels (m,) in {-1, +1})`.

    The arrays are cached and read-only; copy them before changing them.
    """
    return _load()
