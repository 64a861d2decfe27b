"""California housing (Pace & Barry 1997), read from ``shared/data/california_housing``.

20640 block groups, 8 features (longitude, latitude, housing median age, total rooms, total
bedrooms, population, households, median income) and the median house value, the regression
target of MAFALDA-SGD's Housing experiment (its OpenML 823 copy holds the same rows).
"""

from __future__ import annotations

import gzip
from functools import lru_cache

import numpy as np

from dpdl.data.paths import shared_data_file
from dpdl.errors import DataError

__all__ = ["load_california_housing", "FEATURES"]

FEATURES = ("longitude", "latitude", "housing_median_age", "total_rooms", "total_bedrooms", "population", "households", "median_income")
ROWS = 20640


@lru_cache(maxsize=1)
def _load() -> tuple[np.ndarray, np.ndarray]:
    path = shared_data_file("california_housing/cal_housing.data.gz")
    with gzip.open(path, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",")
    if table.shape != (ROWS, len(FEATURES) + 1):
        raise DataError(f"{path}: expected {ROWS} rows of {len(FEATURES) + 1} numbers, got shape {table.shape}")
    features, values = table[:, :-1], table[:, -1]
    features.setflags(write=False)
    values.setflags(write=False)
    return features, values


def load_california_housing() -> tuple[np.ndarray, np.ndarray]:
    """``(features (20640, 8), median house value (20640,))`` as read; cached and read-only."""
    return _load()
