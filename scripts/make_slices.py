"""Write the small real-data slices the test suite runs on (``tests/data``) from the full data sets.

Usage: ``python scripts/make_slices.py FULL_DATA_DIR [DEST]`` (DEST defaults to ``tests/data``).

Every slice keeps its original file's format and name in the full folder's layout, so that dpdl's
loaders read it unchanged: an IDX file holding the first k images (its header's count set to k), the
first rows of a text file, or the whole file where it is small. Files the script compresses are
written as ``gzip -n`` would (no name, time 0), so rerunning it gives the same bytes; it then writes
``SHA256SUMS`` and checks every source file against the full folder's own ``SHA256SUMS`` first.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import sys
from pathlib import Path

#: (folder, split) -> number of leading images kept of each IDX pair.
IDX_SLICES = {
    ("mnist", "train"): 5000,
    ("mnist", "t10k"): 1000,
    ("fashion_mnist", "train"): 1000,
    ("fashion_mnist", "t10k"): 500,
}
ADULT_ROWS = {"adult.data": 3000, "adult.test": 1500}
HOUSING_EVERY = (
    4  # every 4th block group: the file is ordered by place, so its first rows are one region only
)
COPIED = (
    "facebook/facebook_combined.txt.gz",
    "facebook/ego/414.edges.gz",
    "gnutella/p2p-Gnutella08.txt.gz",
)


def _gzip(data: bytes) -> bytes:
    """``gzip -n -9``: no file name and time 0 in the header, so the bytes depend on the data
    only."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def _idx_head(raw: bytes, count: int) -> bytes:
    """The first ``count`` records of an IDX file, with the header's first dimension set to
    ``count``."""
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * k : 8 + 4 * k], "big") for k in range(ndim)]
    record = 1
    for size in dims[1:]:
        record *= size  # every file used here holds uint8 values: one byte each
    header = raw[:4] + count.to_bytes(4, "big") + raw[8 : 4 + 4 * ndim]
    return header + raw[4 + 4 * ndim : 4 + 4 * ndim + count * record]


def _check_sources(source: Path) -> None:
    sums = dict(
        line.split()[::-1]
        for line in (source / "SHA256SUMS").read_text().splitlines()
        if line.strip()
    )
    needed = [
        f"{folder}/{split}-{kind}-idx{n}-ubyte.gz"
        for folder, split in IDX_SLICES
        for kind, n in (("images", 3), ("labels", 1))
    ]
    needed += [f"adult/{name}.gz" for name in ADULT_ROWS] + [
        "california_housing/cal_housing.data.gz",
        *COPIED,
    ]
    for relative in needed:
        actual = hashlib.sha256((source / relative).read_bytes()).hexdigest()
        if actual != sums[relative]:
            sys.exit(
                f"{source / relative}: sha256 {actual} is not the one in {source / 'SHA256SUMS'}"
            )


def make_slices(source: Path, dest: Path) -> None:
    _check_sources(source)
    for (folder, split), count in IDX_SLICES.items():
        for kind, n in (("images", 3), ("labels", 1)):
            name = f"{split}-{kind}-idx{n}-ubyte.gz"
            (dest / folder).mkdir(parents=True, exist_ok=True)
            (dest / folder / name).write_bytes(
                _gzip(_idx_head(gzip.decompress((source / folder / name).read_bytes()), count))
            )
    (dest / "adult").mkdir(parents=True, exist_ok=True)
    for name, rows in ADULT_ROWS.items():
        lines = gzip.decompress((source / "adult" / f"{name}.gz").read_bytes()).splitlines(
            keepends=True
        )
        head = 1 if lines[0].startswith(b"|") else 0  # adult.test opens with '|1x3 Cross validator'
        (dest / "adult" / f"{name}.gz").write_bytes(_gzip(b"".join(lines[: head + rows])))
    lines = gzip.decompress(
        (source / "california_housing" / "cal_housing.data.gz").read_bytes()
    ).splitlines(keepends=True)
    (dest / "california_housing").mkdir(parents=True, exist_ok=True)
    (dest / "california_housing" / "cal_housing.data.gz").write_bytes(
        _gzip(b"".join(lines[::HOUSING_EVERY]))
    )
    for relative in COPIED:
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, dest / relative)
    files = sorted(
        path
        for path in dest.rglob("*")
        if path.is_file() and path.name not in ("SHA256SUMS", "README.md")
    )
    (dest / "SHA256SUMS").write_text(
        "".join(
            f"{hashlib.sha256(path.read_bytes()).hexdigest()}  "
            f"{path.relative_to(dest).as_posix()}\n"
            for path in files
        )
    )


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    make_slices(
        Path(sys.argv[1]),
        Path(sys.argv[2])
        if len(sys.argv) == 3
        else Path(__file__).resolve().parents[1] / "tests" / "data",
    )
