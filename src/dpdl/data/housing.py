"""California housing (Pace & Barry 1997), read from `california_housing/cal_housing.tgz` (the
archive `dpdl data fetch california_housing` downloads, as scikit-learn does) or from
`california_housing/cal_housing.data.gz` (its data file alone).

20640 block groups, 8 features (longitude, latitude, housing median age, total rooms, total
bedrooms, population, households, median income) and the median house value, the regression
target of MAFALDA-SGD's Housing experiment (its OpenML 823 copy holds the same rows).

The table's shape (9 finite numbers a row, no column constant: the task standardises them) is
checked, not its number of rows, so that a slice reads too; a damaged file fails to parse or its
gzip check, and `dpdl data list` compares the files with the published checksums.
"""

from __future__ import annotations

import gzip
import io
import logging
import tarfile
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from dpdl.data.checks import require_finite, require_varying
from dpdl.data.paths import data_file
from dpdl.errors import DataError

__all__ = ["COLUMNS", "FEATURES", "ROWS", "load_california_housing"]

logger = logging.getLogger(__name__)

FEATURES = (
    "longitude",
    "latitude",
    "housing_median_age",
    "total_rooms",
    "total_bedrooms",
    "population",
    "households",
    "median_income",
)
#: The data file's columns: the features, then the target.
COLUMNS = (*FEATURES, "median_house_value")
#: Rows of the full data set (a slice has fewer).
ROWS = 20640
#: The data file's name inside ``cal_housing.tgz``.
MEMBER = "CaliforniaHousing/cal_housing.data"


def _read_text(path: Path) -> str:
    """The data file's text: the archive's member (read in memory, nothing extracted to disk) or
    the gzip file."""
    try:
        if path.name.endswith(".tgz"):
            with tarfile.open(path, "r:gz") as archive:
                member = archive.extractfile(MEMBER)
                if member is None:
                    raise DataError(f"{path}: {MEMBER} is not a regular file")
                return member.read().decode("ascii")
        with gzip.open(path, "rt", encoding="ascii") as handle:
            return handle.read()
    except KeyError:
        raise DataError(f"{path} holds no {MEMBER}") from None
    except (OSError, EOFError, zlib.error, tarfile.TarError, UnicodeDecodeError) as error:
        raise DataError(f"{path} cannot be read: {error}") from None


@lru_cache(maxsize=1)
def _load(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        table = np.loadtxt(io.StringIO(_read_text(path)), delimiter=",", ndmin=2)
    except ValueError as error:
        raise DataError(f"{path}: not a table of numbers ({error})") from None
    if table.shape[1] != len(FEATURES) + 1:
        raise DataError(
            f"{path}: expected rows of {len(FEATURES) + 1} finite numbers, got shape {table.shape}"
        )
    require_finite(table, str(path), COLUMNS)
    require_varying(table, str(path), COLUMNS, "rows of the file")
    if len(table) != ROWS:
        logger.warning(
            "%s holds %d rows, not the full data set's %d: a slice", path, len(table), ROWS
        )
    features, values = table[:, :-1], table[:, -1]
    features.setflags(write=False)
    values.setflags(write=False)
    return features, values


def load_california_housing() -> tuple[np.ndarray, np.ndarray]:
    """`(features (rows, 8), median house value (rows,))` as read (20640 rows in the full data
    set); cached (for the file the data folders give now) and read-only."""
    return _load(
        data_file(
            "california_housing",
            "california_housing/cal_housing.tgz",
            "california_housing/cal_housing.data.gz",
        )
    )
