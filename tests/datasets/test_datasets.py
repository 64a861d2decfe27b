"""The data sets: where they are looked for, the loaders on the slices in tests/data (or the full
data sets where DPDL_DATA_DIR names them), and the slices against the full files."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from dpdl.data import adult, housing, idx
from dpdl.data.paths import data_file, data_roots, manifest
from dpdl.errors import DataError

SLICES = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def fresh_caches():
    """Loaders cache what they read: clear them around a test that moves the data folders."""
    caches = (idx._read_pair, adult._load, housing._load)
    for cache in caches:
        cache.cache_clear()
    yield
    for cache in caches:
        cache.cache_clear()


def test_the_slices_are_the_files_their_checksums_name() -> None:
    """tests/data/SHA256SUMS (written by scripts/make_slices.py) lists every slice file, and each
    file's sha256 is the one listed: nobody edited a slice by hand."""
    listed = dict(line.split()[::-1] for line in (SLICES / "SHA256SUMS").read_text().splitlines())
    present = {
        path.relative_to(SLICES).as_posix() for path in SLICES.rglob("*") if path.is_file()
    } - {"SHA256SUMS", "README.md"}
    assert set(listed) == present
    for relative, expected in listed.items():
        assert hashlib.sha256((SLICES / relative).read_bytes()).hexdigest() == expected, relative


def test_the_slice_folder_is_well_under_three_megabytes() -> None:
    assert sum(path.stat().st_size for path in SLICES.rglob("*") if path.is_file()) < 3_000_000


@pytest.mark.parametrize("folder", ["mnist", "fashion_mnist"])
@pytest.mark.parametrize("split", ["train", "t10k"])
def test_idx_images_and_labels_agree(folder: str, split: str) -> None:
    images, labels = idx.load_idx_dataset(folder, split)
    assert (
        images.dtype == np.uint8
        and images.shape[1:] == (28, 28)
        and len(images) == len(labels) >= 500
    )
    assert set(np.unique(labels)) == set(range(10))  # every class, even in a slice
    assert images.max() == 255 and images.min() == 0
    assert not labels.flags.writeable


def test_read_idx_rejects_truncated_and_foreign_files(tmp_path) -> None:
    raw = gzip.decompress(data_file("mnist", "mnist/t10k-labels-idx1-ubyte.gz").read_bytes())
    short = tmp_path / "short-idx1-ubyte"
    short.write_bytes(raw[:-3])
    with pytest.raises(DataError, match="truncated"):
        idx.read_idx(short)
    foreign = tmp_path / "foreign-idx1-ubyte"
    foreign.write_bytes(b"\x1f\x8b not an idx file")
    with pytest.raises(DataError, match="not an IDX file"):
        idx.read_idx(foreign)
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(raw)[:-20])  # the gzip stream ends early
    with pytest.raises(DataError, match="cannot be read"):
        idx.read_idx(broken)


@pytest.mark.full_data
def test_mnist_has_the_published_shapes_and_counts() -> None:
    images, labels = idx.load_idx_dataset("mnist", "t10k")
    assert images.shape == (10000, 28, 28)
    np.testing.assert_array_equal(
        np.bincount(labels), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    )
    assert len(idx.load_idx_dataset("mnist", "train")[0]) == 60000


@pytest.mark.full_data
def test_the_slices_are_the_leading_records_of_the_full_files() -> None:
    """Each IDX slice holds the full file's first images and labels; each Adult slice the first
    lines; the housing slice every 4th line; the graph files are the full files."""
    full = Path(os.environ["DPDL_DATA_DIR"])
    for path in SLICES.glob("*mnist/*.gz"):
        part, whole = idx.read_idx(path), idx.read_idx(full / path.relative_to(SLICES))
        np.testing.assert_array_equal(part, whole[: len(part)])
    for name in ("adult.data", "adult.test"):
        part = gzip.decompress((SLICES / "adult" / f"{name}.gz").read_bytes())
        whole_path = data_file("adult", f"adult/{name}", f"adult/{name}.gz")
        whole = whole_path.read_bytes()
        whole = gzip.decompress(whole) if whole_path.suffix == ".gz" else whole
        assert whole.startswith(part)
    part = gzip.decompress(
        (SLICES / "california_housing" / "cal_housing.data.gz").read_bytes()
    ).splitlines()
    whole = (
        housing._read_text(
            data_file(
                "california_housing",
                "california_housing/cal_housing.tgz",
                "california_housing/cal_housing.data.gz",
            )
        )
        .encode()
        .splitlines()
    )
    assert part == whole[::4]
    for relative in ("facebook/facebook_combined.txt.gz", "gnutella/p2p-Gnutella08.txt.gz"):
        assert (SLICES / relative).read_bytes() == (full / relative).read_bytes()


def test_adult_rows_are_standardised_one_hot_and_labelled_as_in_the_files() -> None:
    train_features, train_labels = adult.load_adult("train")
    test_features, test_labels = adult.load_adult("test")
    assert train_features.shape[1] == test_features.shape[1] > 6 + 8
    np.testing.assert_allclose(train_features[:, :6].mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(train_features[:, :6].std(axis=0), 1.0, atol=1e-4)
    np.testing.assert_allclose(train_features[:, 6:].sum(axis=1), 8.0)  # one category per attribute
    # The labels are the files' income column: count '>50K' in the raw text independently.
    for labels, name in ((train_labels, "adult.data"), (test_labels, "adult.test")):
        path = data_file("adult", f"adult/{name}", f"adult/{name}.gz")
        text = (
            gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        ).decode()
        assert labels.sum() == text.count(">50K") and len(labels) - labels.sum() == text.count(
            "<=50K"
        )


def test_adult_rejects_a_row_with_missing_fields(tmp_path, monkeypatch, fresh_caches) -> None:
    (tmp_path / "adult").mkdir()
    good = (
        "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, "
        "Male, 2174, 0, 40, United-States, <=50K\n"
    )
    (tmp_path / "adult" / "adult.data").write_text(
        good + "50, Self-emp-not-inc, 83311, Bachelors, 13\n"
    )
    (tmp_path / "adult" / "adult.test").write_text(
        "|1x3 Cross validator\n" + good.replace("<=50K", ">50K.")
    )
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    with pytest.raises(
        DataError, match=r"adult\.data:2: expected 15 comma-separated fields, got 5"
    ):
        adult.load_adult("train")
    (tmp_path / "adult" / "adult.data").write_text(good + good.replace("<=50K", "rich"))
    with pytest.raises(DataError, match="unknown income labels"):
        adult.load_adult("train")


def test_housing_table_is_read_from_either_layout(tmp_path, monkeypatch, fresh_caches) -> None:
    """The gzip data file (the test slices, the old layout) and scikit-learn's archive (what
    'dpdl data fetch' writes) give the same table; a ragged row is an error."""
    import io
    import tarfile

    features, values = housing.load_california_housing()
    assert features.shape == (len(values), 8) and len(values) >= 5000
    assert values.min() >= 14999 and values.max() <= 500001  # the data set's capped range
    raw = gzip.decompress(
        data_file("california_housing", "california_housing/cal_housing.data.gz").read_bytes()
    )
    (tmp_path / "california_housing").mkdir()
    with tarfile.open(tmp_path / "california_housing" / "cal_housing.tgz", "w:gz") as archive:
        member = tarfile.TarInfo(housing.MEMBER)
        member.size = len(raw)
        archive.addfile(member, io.BytesIO(raw))
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    housing._load.cache_clear()
    again = housing.load_california_housing()
    np.testing.assert_array_equal(again[0], features)
    np.testing.assert_array_equal(again[1], values)
    (tmp_path / "california_housing" / "cal_housing.tgz").unlink()
    (tmp_path / "california_housing" / "cal_housing.data.gz").write_bytes(
        gzip.compress(raw + b"1.0,2.0\n")
    )
    housing._load.cache_clear()
    with pytest.raises(DataError, match=r"cal_housing\.data\.gz"):
        housing.load_california_housing()


# ------------------------------------------------------------------------ where data sets are found


def test_data_dir_comes_before_the_cache(tmp_path, monkeypatch) -> None:
    data, cache = tmp_path / "data", tmp_path / "cache"
    for root in (data, cache):
        (root / "gnutella").mkdir(parents=True)
        (root / "gnutella" / "p2p-Gnutella08.txt.gz").write_text(root.name)
    monkeypatch.setenv("DPDL_DATA_DIR", str(data))
    monkeypatch.setenv("DPDL_CACHE_DIR", str(cache))
    assert data_roots() == [("DPDL_DATA_DIR", data), ("cache", cache)]
    assert (
        data_file("gnutella", "gnutella/p2p-Gnutella08.txt.gz")
        == data / "gnutella" / "p2p-Gnutella08.txt.gz"
    )
    (data / "gnutella" / "p2p-Gnutella08.txt.gz").unlink()
    assert (
        data_file("gnutella", "gnutella/p2p-Gnutella08.txt.gz")
        == cache / "gnutella" / "p2p-Gnutella08.txt.gz"
    )
    monkeypatch.delenv("DPDL_DATA_DIR")
    assert data_roots() == [("cache", cache)]
    # Within a root, the layouts are tried in the order given.
    (cache / "gnutella" / "other.gz").write_text("x")
    assert (
        data_file("gnutella", "gnutella/other.gz", "gnutella/p2p-Gnutella08.txt.gz").name
        == "other.gz"
    )


def test_the_cache_defaults_to_the_platforms_user_cache(monkeypatch) -> None:
    import platformdirs

    monkeypatch.delenv("DPDL_DATA_DIR", raising=False)
    monkeypatch.delenv("DPDL_CACHE_DIR", raising=False)
    assert data_roots() == [("cache", Path(platformdirs.user_cache_dir("dpdl")))]


def test_a_data_dir_that_is_not_a_folder_is_an_error_naming_it(tmp_path, monkeypatch) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    for value in (str(not_a_folder), str(tmp_path / "missing")):
        monkeypatch.setenv("DPDL_DATA_DIR", value)
        with pytest.raises(DataError, match=f"DPDL_DATA_DIR={value} is not a folder"):
            data_file("mnist", "mnist/t10k-labels-idx1-ubyte.gz")


@pytest.mark.parametrize(
    ("load", "dataset"),
    [
        (lambda: idx.load_idx_dataset("fashion_mnist", "t10k"), "fashion_mnist"),
        (lambda: adult.load_adult("train"), "adult"),
        (housing.load_california_housing, "california_housing"),
    ],
)
def test_a_missing_data_set_is_one_error_saying_how_to_get_it(
    tmp_path, monkeypatch, fresh_caches, load, dataset: str
) -> None:
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DPDL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(DataError) as caught:
        load()
    message = str(caught.value)
    assert message.startswith(f"data set {dataset!r} not found")
    assert f"{tmp_path} (DPDL_DATA_DIR)" in message and f"{tmp_path / 'cache'} (cache)" in message
    assert f"'dpdl data fetch {dataset}'" in message
    monkeypatch.delenv("DPDL_DATA_DIR")
    with pytest.raises(
        DataError, match=f"'dpdl data fetch {dataset}'; or set DPDL_DATA_DIR to a folder holding it"
    ):
        load()


def test_the_manifest_names_every_file_with_a_checksum_and_says_where_none_is_verifiable() -> None:
    for name, entry in manifest().items():
        assert entry["licence"] and entry["citation"] and entry["files"], name
        for item in entry["files"]:
            assert len(item["sha256"]) == 64 and int(item["sha256"], 16) >= 0
            assert item["url"] is None or item["url"].startswith(("https://", "http://"))
            assert (item["url"] is None) == ("manual" in entry), (
                name,
                item["path"],
            )  # no URL: the manifest says why


def test_the_manifest_checksums_match_the_slices_that_are_whole_files() -> None:
    """The slices copied whole (SNAP's graph files) carry the published bytes: the manifest's sha256
    of them is checked here on every run, not only where the full data sets are."""
    published = {
        item["path"]: item["sha256"] for entry in manifest().values() for item in entry["files"]
    }
    published |= {
        alt["path"]: alt["sha256"]
        for entry in manifest().values()
        for item in entry["files"]
        for alt in item.get("alternatives", [])
    }
    for relative in (
        "facebook/facebook_combined.txt.gz",
        "facebook/ego/414.edges.gz",
        "gnutella/p2p-Gnutella08.txt.gz",
    ):
        assert hashlib.sha256((SLICES / relative).read_bytes()).hexdigest() == published[relative]
