"""UCI Adult / Census Income, read from the original files `adult/adult.data` and
`adult/adult.test` (or their `.gz`).

The original 32561 training and 16281 test rows, 14 attributes and the income label (>50K or not),
the binary task of LPPA's Tables 1-4. Numeric attributes are standardised with the training rows'
statistics; categorical ones are one-hot encoded by scikit-learn's
`OneHotEncoder` fitted on the training rows (a missing value, "?", is
a category of its own, as in the original files).

Every row is checked (15 fields, finite numbers where numbers belong, a known label; no numeric
attribute constant over the training rows, which standardising divides by), not the number of
rows, so that a slice of the files reads too; a truncated file fails on its last, broken row or on
its gzip check, and `dpdl data list` compares the files with the published checksums.
"""

from __future__ import annotations

import csv
import gzip
import logging
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np
from sklearn.preprocessing import OneHotEncoder

from dpdl.data.checks import require_finite, require_varying
from dpdl.data.paths import data_file
from dpdl.errors import DataError

__all__ = ["CATEGORICAL", "COLUMNS", "NUMERIC", "ROWS", "load_adult"]

logger = logging.getLogger(__name__)

#: The 15 columns of the original files, in their order (adult.names).
COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
)
NUMERIC = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")
CATEGORICAL = (
    "workclass",
    "education",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native_country",
)
#: Rows of the full files (a slice has fewer).
ROWS = {"train": 32561, "test": 16281}
_FILES = {"train": "adult.data", "test": "adult.test"}
_LABELS = {"<=50K": 0, ">50K": 1}


def _read_rows(path: Path) -> tuple[list[list[str]], list[int]]:
    """The data rows of one original file, fields stripped, and their lines in the file; blank
    lines and the test file's first line (`|1x3 Cross validator`) skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    rows, lines = [], []
    try:
        with opener(path, "rt", newline="") as handle:
            for lineno, fields in enumerate(csv.reader(handle), start=1):
                if not fields or (
                    len(fields) == 1 and (not fields[0].strip() or fields[0].startswith("|"))
                ):
                    continue
                if len(fields) != len(COLUMNS):
                    raise DataError(
                        f"{path}:{lineno}: expected {len(COLUMNS)} comma-separated fields, got "
                        f"{len(fields)}"
                    )
                rows.append([field.strip() for field in fields])
                lines.append(lineno)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
        raise DataError(f"{path} cannot be read: {error}") from None
    if not rows:
        raise DataError(f"{path} holds no rows")
    return rows, lines


def _parse(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(numeric (m, 6) float, categorical (m, 8) str, labels (m,) int64) of one original file."""
    rows, lines = _read_rows(path)
    index = {name: k for k, name in enumerate(COLUMNS)}
    try:
        numeric = np.array([[float(row[index[name]]) for name in NUMERIC] for row in rows])
    except ValueError as error:
        raise DataError(f"{path}: a numeric attribute is not a number ({error})") from None
    require_finite(numeric, str(path), NUMERIC, lines)
    categorical = np.array([[row[index[name]] for name in CATEGORICAL] for row in rows])
    incomes = [
        row[index["income"]].rstrip(".") for row in rows
    ]  # the test file's labels end with a dot
    unknown = set(incomes) - set(_LABELS)
    if unknown:
        row = next(k for k, income in enumerate(incomes) if income in unknown)
        raise DataError(
            f"{path}: row {lines[row]}: unknown income labels {sorted(unknown)} (the first, "
            f"{incomes[row]!r}, in this row); expected <=50K or >50K"
        )
    return numeric, categorical, np.array([_LABELS[income] for income in incomes], dtype=np.int64)


@lru_cache(maxsize=1)
def _load(paths: tuple[Path, ...]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The splits of `_FILES` read from `paths` (in its order)."""
    parts = {}
    for split, path in zip(_FILES, paths, strict=True):
        parts[split] = _parse(path)
        if len(parts[split][2]) != ROWS[split]:
            logger.warning(
                "%s holds %d rows, not the full data set's %d: a slice",
                path,
                len(parts[split][2]),
                ROWS[split],
            )
    numeric_train, categorical_train, _ = parts["train"]
    require_varying(numeric_train, str(paths[0]), NUMERIC, "training rows")
    mean, std = numeric_train.mean(axis=0), numeric_train.std(axis=0)
    encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(categorical_train)
    result = {}
    for split, (numeric, categorical, labels) in parts.items():
        features = np.hstack([(numeric - mean) / std, encoder.transform(categorical)]).astype(
            np.float32
        )
        result[split] = (features, labels)
        for array in result[split]:
            array.setflags(write=False)
    return result


def load_adult(split: str) -> tuple[np.ndarray, np.ndarray]:
    """`(features (rows, 108), labels (rows,) in {0, 1})` of the `train` or `test` rows
    (108 features on the full files: 6 numeric and the training rows' 102 categories); cached and
    read-only (cached for the files the data folders give now)."""
    if split not in ROWS:
        raise DataError(f"unknown Adult split {split!r}; known: {', '.join(ROWS)}")
    paths = tuple(
        data_file("adult", f"adult/{name}", f"adult/{name}.gz") for name in _FILES.values()
    )
    return _load(paths)[split]
