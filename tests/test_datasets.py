"""MNIST / Fashion-MNIST: the shared copy, and the verified download into a cache."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from dpdl.data import idx
from dpdl.data.paths import shared_data_dir
from dpdl.errors import DataError


def test_mnist_from_the_shared_copy_has_the_published_shapes_and_counts() -> None:
    images, labels = idx.load_idx_dataset("mnist", "t10k")
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(labels), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])


def test_download_path_verifies_sha256_and_caches(tmp_path, monkeypatch) -> None:
    """Without a shared copy the file comes from the mirror (here a local file:// folder)."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    name = "t10k-labels-idx1-ubyte.gz"
    shutil.copy(shared_data_dir() / "mnist" / name, mirror / name)
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(idx, "shared_data_file", lambda relative: (_ for _ in ()).throw(DataError("absent")))
    cache = tmp_path / "cache"
    path = idx.dataset_file("mnist", name, cache_dir=cache, base_url=mirror.as_uri() + "/")
    assert path == cache / "mnist" / name and path.is_file()
    assert len(idx.read_idx(path)) == 10000
    (mirror / name).unlink()  # cached: no second download needed
    assert idx.dataset_file("mnist", name, cache_dir=cache, base_url=mirror.as_uri() + "/") == path
    # A corrupted file fails verification and is deleted.
    path.write_bytes(b"corrupted")
    with pytest.raises(DataError, match="SHA-256"):
        idx.dataset_file("mnist", name, cache_dir=cache, base_url=mirror.as_uri() + "/")
    assert not path.exists()
    with pytest.raises(DataError, match="downloading"):
        idx.dataset_file("mnist", name, cache_dir=cache, base_url=mirror.as_uri() + "/")
