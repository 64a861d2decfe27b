"""MNIST and Fashion-MNIST: the IDX format (LeCun et al., 1998), and where the files come from.

Files are read from ``shared/data`` when present; otherwise they are downloaded once from the
canonical distribution into a cache folder (``DPDL_CACHE_DIR``, default ``~/.cache/dpdl``) and their
SHA-256 is checked against the published files' before use (a mismatch deletes the download).

Written by hand: the format is a 4-byte magic number, big-endian dimension sizes and raw bytes,
which numpy reads directly; torchvision (the usual reader) has no CPU build on these machines.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import urllib.request
from functools import lru_cache
from pathlib import Path

import numpy as np

from dpdl.data.paths import shared_data_file
from dpdl.errors import DataError

__all__ = ["read_idx", "load_idx_dataset", "dataset_file", "SOURCES"]

#: Canonical download location and SHA-256 of every file (the gzip files as published).
SOURCES: dict[str, tuple[str, dict[str, str]]] = {
    "mnist": (
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        {
            "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        },
    ),
    "fashion_mnist": (
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        {
            "train-images-idx3-ubyte.gz": "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            "train-labels-idx1-ubyte.gz": "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            "t10k-images-idx3-ubyte.gz": "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            "t10k-labels-idx1-ubyte.gz": "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        },
    ),
}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_file(folder: str, name: str, cache_dir: Path | None = None, base_url: str | None = None) -> Path:
    """Path of ``folder/name``: the shared copy, else a verified download in the cache folder."""
    if folder not in SOURCES or name not in SOURCES[folder][1]:
        raise DataError(f"unknown data file {folder}/{name}")
    try:
        return shared_data_file(f"{folder}/{name}")
    except DataError:
        pass
    url = (base_url or SOURCES[folder][0]) + name
    expected = SOURCES[folder][1][name]
    cache = (cache_dir or Path(os.environ.get("DPDL_CACHE_DIR", "~/.cache/dpdl")).expanduser()) / folder
    path = cache / name
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(path.suffix + ".part")
        try:
            with urllib.request.urlopen(url, timeout=60) as response, partial.open("wb") as handle:
                handle.write(response.read())
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise DataError(f"{folder}/{name} is not in shared/data and downloading {url} failed: {error}") from None
        partial.replace(path)
    actual = _sha256(path)
    if actual != expected:
        path.unlink()
        raise DataError(f"{path}: SHA-256 {actual} does not match the published {expected}; the download was deleted")
    return path

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """The array stored in an IDX file (``.gz`` or plain)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise DataError(f"{path} is not an IDX file")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * k : 8 + 4 * k], "big") for k in range(ndim))
    data = np.frombuffer(raw, dtype=_DTYPES[raw[2]], offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise DataError(f"{path} is truncated: expected {int(np.prod(shape))} values, found {data.size}")
    return data.reshape(shape)


@lru_cache(maxsize=4)
def load_idx_dataset(folder: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """``(images (m, 28, 28) uint8, labels (m,) int64)`` of ``folder`` (``mnist`` or
    ``fashion_mnist``), ``split`` being ``train`` or ``t10k`` (see :func:`dataset_file`).

    The arrays are cached (a process that trains many runs decompresses once) and read-only."""
    images = read_idx(dataset_file(folder, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(dataset_file(folder, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    if len(images) != len(labels):
        raise DataError(f"{folder}/{split}: {len(images)} images but {len(labels)} labels")
    labels.setflags(write=False)
    return images, labels
