"""Rerun reproductions on two versions of the engine and compare their runs, number by number.

For each reproduction named, ``dpdl reproduce NAME`` (``--quick`` unless ``--full``) runs once on
this tree's ``src`` and once on the source of git revision ``--baseline`` (checked out into a
temporary worktree), each into its own empty folder (a reproduction caches its points there), so
that every point is computed anew. The two ``runs.csv`` files are then matched row by row (same
job columns) and every numeric column but the seconds each run took is compared: the largest
absolute and relative difference per reproduction is printed, and the rows whose values differ by
more than ``--rtol`` (relative) are listed.

An engine change that only reorders floating-point arithmetic moves the numbers by rounding
(relative differences around 1e-12 and below, a little more after thousands of steps on
ill-conditioned problems); a change of what is drawn moves them by seed noise.

Run from the repository root: ``.venv/bin/python scripts/compare_engines.py whisper-quadratic
decor-fig1 --baseline f28a8ce``; ``--out FOLDER`` keeps both runs' folders.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dpdl.experiments.cache import RUN_SECONDS

ROOT = Path(__file__).resolve().parent.parent
#: Absolute differences at or below this are rounding whatever the values' size.
ABSOLUTE_FLOOR = 1e-12


def _reproduce(name: str, source: Path, out: Path, quick: bool, workers: int) -> Path:
    if out.exists():
        raise SystemExit(f"{out} exists: give an empty --out")
    env = {**os.environ, "PYTHONPATH": str(source)}
    command = [sys.executable, "-m", "dpdl.cli", "reproduce", name, "--out", str(out)]
    command += ["--workers", str(workers), "--no-progress"] + (["--quick"] if quick else [])
    subprocess.run(command, check=True, env=env, cwd=ROOT)
    return out / "runs.csv"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def compare(old: Path, new: Path, rtol: float) -> tuple[int, float, float, list[str]]:
    """(values compared, largest absolute difference, largest relative difference, rows beyond
    ``rtol``) between two runs.csv files of the same grid, rows in the same order. Relative
    differences count where the absolute one exceeds :data:`ABSOLUTE_FLOOR` (a consensus distance
    of 1e-30 on one side and 2e-30 on the other is rounding, not a relative change of 1)."""
    before, after = _rows(old), _rows(new)
    if len(before) != len(after):
        raise SystemExit(f"{old} has {len(before)} rows, {new} {len(after)}: not the same grid")
    count, largest_abs, largest_rel, beyond = 0, 0.0, 0.0, []
    for index, (a, b) in enumerate(zip(before, after, strict=True)):
        for column, text in a.items():
            if column == RUN_SECONDS:  # a cost, not a result: it differs between any two runs
                continue
            x, y = _number(text), _number(b.get(column, ""))
            if x is None or y is None:
                if text != b.get(column):
                    beyond.append(f"row {index}, {column}: {text!r} then, {b.get(column)!r} now")
                continue
            if math.isnan(x) and math.isnan(y):
                continue
            count += 1
            difference = abs(x - y)
            relative = difference / max(abs(x), abs(y), 1e-300)
            largest_abs = max(largest_abs, difference)
            if difference > ABSOLUTE_FLOOR:
                largest_rel = max(largest_rel, relative)
            if relative > rtol and difference > ABSOLUTE_FLOOR:
                beyond.append(f"row {index}, {column}: {x!r} then, {y!r} now ({relative:.2e})")
    return count, largest_abs, largest_rel, beyond


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="reproductions (dpdl reproduce --list)")
    parser.add_argument("--baseline", required=True, help="git revision of the other engine")
    parser.add_argument("--full", action="store_true", help="the full grids, not --quick")
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, help="keep both runs' folders here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.out or Path(scratch)
        baseline = Path(scratch) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(baseline), args.baseline],
            check=True,
            capture_output=True,
        )
        try:
            for name in args.names:
                runs = {}
                for label, source in (("baseline", baseline / "src"), ("this", ROOT / "src")):
                    runs[label] = _reproduce(
                        name,
                        source,
                        folder / label / name,
                        not args.full,
                        args.workers,
                    )
                count, largest_abs, largest_rel, beyond = compare(
                    runs["baseline"], runs["this"], args.rtol
                )
                print(
                    f"{name}: {count} values; largest difference {largest_abs:.3g} absolute, "
                    f"{largest_rel:.3g} relative; {len(beyond)} beyond rtol {args.rtol:g}"
                )
                for line in beyond[:20]:
                    print(f"  {line}")
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)],
                check=False,
            )


if __name__ == "__main__":
    main()
