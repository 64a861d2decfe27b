"""UCI Adult / Census Income, read from ``shared/data/adult/adult.csv.gz``.

48842 people (the original 32561 training and 16281 test rows, marked in the ``split`` column),
14 attributes and the income label (>50K or not), the binary task of LPPA's Tables 1-4. Numeric
attributes are standardised with the training rows' statistics; categorical ones are one-hot
encoded by scikit-learn's :class:`~sklearn.preprocessing.OneHotEncoder` fitted on the training
rows (a missing value, "?", is a category of its own, as in the original files).
"""

from __future__ import annotations

import csv
import gzip
from functools import lru_cache

import numpy as np
from sklearn.preprocessing import OneHotEncoder

from dpdl.data.paths import shared_data_file
from dpdl.errors import DataError

__all__ = ["load_adult", "NUMERIC", "CATEGORICAL"]

NUMERIC = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")
CATEGORICAL = ("workclass", "education", "marital_status", "occupation", "relationship", "race", "sex", "native_country")
ROWS = {"train": 32561, "test": 16281}


@lru_cache(maxsize=1)
def _load() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    path = shared_data_file("adult/adult.csv.gz")
    with gzip.open(path, "rt", newline="") as handle:
        rows = list(csv.DictReader(handle))
    missing = {"split", "income", *NUMERIC, *CATEGORICAL} - set(rows[0] if rows else ())
    if missing:
        raise DataError(f"{path}: columns missing: {', '.join(sorted(missing))}")
    split = np.array([row["split"] for row in rows])
    counts = {name: int((split == name).sum()) for name in ROWS}
    if counts != ROWS:
        raise DataError(f"{path}: expected {ROWS} train/test rows, got {counts}")
    numeric = np.array([[float(row[column]) for column in NUMERIC] for row in rows])
    categorical = np.array([[row[column].strip() for column in CATEGORICAL] for row in rows])
    labels = np.array([row["income"].strip().rstrip(".") == ">50K" for row in rows], dtype=np.int64)
    train = split == "train"
    mean, std = numeric[train].mean(axis=0), numeric[train].std(axis=0)
    encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(categorical[train])
    features = np.hstack([(numeric - mean) / std, encoder.transform(categorical)]).astype(np.float32)
    result = {}
    for name in ROWS:
        part = split == name
        result[name] = (features[part], labels[part])
        for array in result[name]:
            array.setflags(write=False)
    return result


def load_adult(split: str) -> tuple[np.ndarray, np.ndarray]:
    """``(features (rows, 108), labels (rows,) in {0, 1})`` of the ``train`` or ``test`` rows;
    cached and read-only."""
    if split not in ROWS:
        raise DataError(f"unknown Adult split {split!r}; known: {', '.join(ROWS)}")
    return _load()[split]
