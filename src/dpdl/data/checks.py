"""Checks of a data file's values on load: finite numbers, labels in range, columns that vary
where a task standardises them. Each failure is one [`DataError`][dpdl.errors.DataError] naming the
file, the row (1-based, as an editor counts lines) and column, and the problem, so that a NaN in a
data file stops the run before any work instead of ending it with NaN metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpdl.errors import DataError

__all__ = ["require_finite", "require_labels", "require_varying"]


def _column(names: Sequence[str] | None, k: int) -> str:
    return f"column {k + 1}" + (f" ({names[k]})" if names is not None else "")


def require_finite(
    values: np.ndarray,
    where: str,
    columns: Sequence[str] | None = None,
    rows: Sequence[int] | None = None,
) -> None:
    """Raise `DataError` for the first value of `values` (a 1-d or 2-d array read from `where`)
    that is not finite. `columns`: the columns' names; `rows`: each row's line in the file
    (default: row i is line i + 1)."""
    values = np.asarray(values)
    if values.dtype.kind not in "fc":
        return
    bad = ~np.isfinite(values)
    if not bad.any():
        return
    place = np.argwhere(bad)[0]
    row = int(place[0])
    line = rows[row] if rows is not None else row + 1
    text = f"{where}: row {line}"
    if values.ndim > 1:
        text += f", {_column(columns, int(place[1]))}"
    value = values[tuple(place)]
    raise DataError(
        f"{text}: {value} is not a finite number ({int(bad.sum())} such values in the file)"
    )


def require_labels(
    labels: np.ndarray, allowed: Sequence[int], where: str, rows: Sequence[int] | None = None
) -> None:
    """Raise `DataError` for the first label of `labels` (read from `where`) not in `allowed`."""
    labels = np.asarray(labels)
    bad = ~np.isin(labels, np.asarray(allowed))
    if not bad.any():
        return
    row = int(np.argmax(bad))
    line = rows[row] if rows is not None else row + 1
    expected = (
        f"{min(allowed)}..{max(allowed)}"
        if len(allowed) > 2 and list(allowed) == list(range(min(allowed), max(allowed) + 1))
        else ", ".join(str(a) for a in allowed)
    )
    raise DataError(
        f"{where}: row {line}: label {labels[row]!r} is out of range; expected {expected} "
        f"({int(bad.sum())} such labels in the file)"
    )


def require_varying(
    values: np.ndarray, where: str, columns: Sequence[str] | None = None, of: str = "rows"
) -> None:
    """Raise `DataError` if a column of `values` (2-d, read from `where`) is constant over its
    `of` (e.g. "the training rows"), or `values` has no rows: standardising it divides by
    zero."""
    values = np.asarray(values)
    if len(values) == 0:
        raise DataError(f"{where}: no {of} to standardise the columns with")
    constant = np.flatnonzero(np.ptp(values, axis=0) == 0)
    if constant.size:
        k = int(constant[0])
        raise DataError(
            f"{where}: {_column(columns, k)} is constant ({values[0, k]:g}) over the {of}: "
            f"standardising it divides by zero ({constant.size} constant column(s))"
        )
