"""MNIST and Fashion-MNIST: the IDX format (LeCun et al., 1998).

The files are the published `.gz` files (`mnist/`, `fashion_mnist/`), found as
`dpdl.data.paths.data_file` says; `dpdl data fetch mnist` downloads and verifies them.

Written by hand: the format is a 4-byte magic number, big-endian dimension sizes and raw bytes,
which numpy reads directly; torchvision (the usual reader) has no CPU build on these machines.
"""

from __future__ import annotations

import gzip
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from dpdl.data.checks import require_finite, require_labels
from dpdl.data.paths import data_file
from dpdl.errors import DataError

__all__ = ["CLASSES", "IDX_FOLDERS", "IMAGE_SHAPE", "load_idx_dataset", "read_idx"]

#: The data sets in IDX files, by folder.
IDX_FOLDERS = ("mnist", "fashion_mnist")

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """The array stored in an IDX file (`.gz` or plain)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError, zlib.error) as error:  # a truncated or damaged gzip stream
        raise DataError(f"{path} cannot be read: {error}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise DataError(f"{path} is not an IDX file")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise DataError(
            f"{path} is truncated: its header announces {ndim} dimensions, the file ends before "
            "their sizes"
        )
    shape = tuple(int.from_bytes(raw[4 + 4 * k : 8 + 4 * k], "big") for k in range(ndim))
    data = np.frombuffer(raw, dtype=_DTYPES[raw[2]], offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise DataError(
            f"{path} is truncated: expected {int(np.prod(shape))} values, found {data.size}"
        )
    return data.reshape(shape)


def load_idx_dataset(folder: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """`(images (m, 28, 28) uint8, labels (m,) int64)` of `folder` (`mnist` or
    `fashion_mnist`), `split` being `train` or `t10k`; the shapes, finite pixels and labels in
    0..9 checked (one [`DataError`][dpdl.errors.DataError] naming the file and row).

    The arrays are cached for the files the data folders give now (a process that trains many
    runs decompresses once) and read-only."""
    if folder not in IDX_FOLDERS or split not in ("train", "t10k"):
        raise DataError(
            f"unknown IDX data {folder}/{split}; known: {', '.join(IDX_FOLDERS)} x train, t10k"
        )
    return _read_pair(
        f"{folder}/{split}",
        data_file(folder, f"{folder}/{split}-images-idx3-ubyte.gz"),
        data_file(folder, f"{folder}/{split}-labels-idx1-ubyte.gz"),
    )


#: The classes of both data sets' labels.
CLASSES = tuple(range(10))
#: An image's shape.
IMAGE_SHAPE = (28, 28)


@lru_cache(maxsize=4)
def _read_pair(name: str, images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    images = read_idx(images_path)
    labels = read_idx(labels_path)
    if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE or len(images) == 0:
        raise DataError(
            f"{images_path}: expected images of {IMAGE_SHAPE[0]} x {IMAGE_SHAPE[1]} pixels, "
            f"(m, 28, 28), got an array of shape {images.shape}"
        )
    if labels.ndim != 1:
        raise DataError(f"{labels_path}: expected one label per image, got shape {labels.shape}")
    require_finite(images.reshape(len(images), -1), str(images_path))
    require_finite(labels, str(labels_path))
    require_labels(labels, CLASSES, str(labels_path))
    labels = labels.astype(np.int64)
    if len(images) != len(labels):
        raise DataError(f"{name}: {len(images)} images but {len(labels)} labels")
    labels.setflags(write=False)
    return images, labels
