"""dpdl data fetch / list: downloads from a local HTTP server on 127.0.0.1 only (started and shut
down by each test), verified against sha256, retried when the connection drops."""

from __future__ import annotations

import hashlib
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dpdl.cli import main
from dpdl.data import fetch as fetch_module
from dpdl.data.fetch import download, fetch, survey
from dpdl.errors import DataError

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB: more than one chunk
SHA = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    """Serves ``server.files``; a path in ``server.drops`` sends its headers and half its bytes,
    then closes the connection, that many times; every request is counted in ``server.requests``."""

    def do_GET(self) -> None:
        server = self.server
        server.requests.append(self.path)
        body = server.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.drops.get(self.path, 0) > 0:
            server.drops[self.path] -= 1
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.files, httpd.drops, httpd.requests = {}, {}, []
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_good_file_is_verified_and_renamed_into_place_with_progress(server, tmp_path) -> None:
    server.files["/data.bin"] = PAYLOAD
    seen: list[tuple[int, int | None]] = []
    path = download(
        f"{server.url}/data.bin",
        tmp_path / "set" / "data.bin",
        SHA,
        len(PAYLOAD),
        progress=lambda d, t: seen.append((d, t)),
    )
    assert path.read_bytes() == PAYLOAD
    assert _leftovers(tmp_path / "set") == ["data.bin"]  # no temporary file left
    assert seen[-1] == (len(PAYLOAD), len(PAYLOAD)) and len(seen) >= 1
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_a_corrupted_file_is_a_checksum_error_and_leaves_nothing(server, tmp_path) -> None:
    corrupted = bytearray(PAYLOAD)
    corrupted[1000] ^= 1
    server.files["/data.bin"] = bytes(corrupted)
    with pytest.raises(
        DataError,
        match=f"sha256 {hashlib.sha256(corrupted).hexdigest()} is not the published {SHA}; nothing "
        "was kept",
    ):
        download(f"{server.url}/data.bin", tmp_path / "data.bin", SHA, len(PAYLOAD), backoff=0.0)
    assert _leftovers(tmp_path) == []
    assert len(server.requests) == 1  # a wrong file is not downloaded again


def test_a_dropped_connection_is_retried(server, tmp_path, caplog) -> None:
    server.files["/data.bin"] = PAYLOAD
    server.drops["/data.bin"] = 2
    with caplog.at_level(logging.WARNING, logger="dpdl.data.fetch"):
        path = download(
            f"{server.url}/data.bin",
            tmp_path / "data.bin",
            SHA,
            len(PAYLOAD),
            retries=3,
            backoff=0.0,
        )
    assert path.read_bytes() == PAYLOAD and _leftovers(tmp_path) == ["data.bin"]
    assert server.requests == ["/data.bin"] * 3
    assert sum("retrying" in record.getMessage() for record in caplog.records) == 2


def test_a_connection_that_keeps_dropping_is_a_clear_error_and_leaves_nothing(
    server, tmp_path
) -> None:
    server.files["/data.bin"] = PAYLOAD
    server.drops["/data.bin"] = 10
    with pytest.raises(
        DataError,
        match=r"failed 3 times; last: .*(stopped after 524288 of 1048576 bytes|IncompleteRead)",
    ):
        download(
            f"{server.url}/data.bin",
            tmp_path / "data.bin",
            SHA,
            len(PAYLOAD),
            retries=3,
            backoff=0.0,
        )
    assert server.requests == ["/data.bin"] * 3
    assert _leftovers(tmp_path) == []


def test_a_missing_file_is_not_retried(server, tmp_path) -> None:
    with pytest.raises(DataError, match="HTTP 404"):
        download(f"{server.url}/absent.bin", tmp_path / "absent.bin", SHA, retries=3, backoff=0.0)
    assert server.requests == ["/absent.bin"] and _leftovers(tmp_path) == []


def test_a_refused_connection_is_retried_then_reported(tmp_path) -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = closed.server_address[1]
    closed.server_close()  # nothing listens on the port any more
    with pytest.raises(DataError, match="failed 2 times"):
        download(f"http://127.0.0.1:{port}/x", tmp_path / "x", SHA, retries=2, backoff=0.0)
    assert _leftovers(tmp_path) == []


def _toy_manifest(url: str) -> dict:
    second = b"second file\n"
    return {
        "toy": {
            "title": "toy",
            "licence": "none",
            "citation": "none",
            "files": [
                {"path": "toy/a.bin", "url": f"{url}/a.bin", "sha256": SHA, "size": len(PAYLOAD)},
                {
                    "path": "toy/b.txt",
                    "url": f"{url}/b.txt",
                    "sha256": hashlib.sha256(second).hexdigest(),
                    "size": len(second),
                },
            ],
        },
        "handmade": {
            "title": "handmade",
            "licence": "none",
            "citation": "none",
            "manual": "copy it to <dest>/hand/c.txt.",
            "files": [{"path": "hand/c.txt", "url": None, "sha256": "ab" * 32, "size": 1}],
        },
    }, second


def test_fetch_writes_the_data_layout_and_keeps_verified_files(server, tmp_path) -> None:
    datasets, second = _toy_manifest(server.url)
    server.files.update({"/a.bin": PAYLOAD, "/b.txt": second})
    started: list[str] = []
    paths = fetch(
        "toy",
        tmp_path,
        datasets=datasets,
        progress=lambda relative: started.append(relative) or None,
        backoff=0.0,
    )
    assert paths == [tmp_path / "toy" / "a.bin", tmp_path / "toy" / "b.txt"] and started == [
        "toy/a.bin",
        "toy/b.txt",
    ]
    assert paths[1].read_bytes() == second
    (tmp_path / "toy" / "b.txt").write_bytes(b"damaged")
    fetch("toy", tmp_path, datasets=datasets, backoff=0.0)
    assert server.requests == ["/a.bin", "/b.txt", "/b.txt"]  # only the damaged file again
    assert (tmp_path / "toy" / "b.txt").read_bytes() == second


def test_fetch_of_a_data_set_without_a_verifiable_original_says_where_and_what(tmp_path) -> None:
    datasets, _ = _toy_manifest("http://127.0.0.1:9")
    with pytest.raises(
        DataError,
        match=f"handmade cannot be fetched: copy it to {tmp_path}/hand/c.txt. Expected: hand/c.txt "
        f"sha256 {'ab' * 32}",
    ):
        fetch("handmade", tmp_path, datasets=datasets)
    with pytest.raises(DataError, match="unknown data set 'nope'; known: toy, handmade"):
        fetch("nope", tmp_path, datasets=datasets)


def test_cli_fetch_and_list(server, tmp_path, monkeypatch, capsys) -> None:
    datasets, second = _toy_manifest(server.url)
    server.files.update({"/a.bin": PAYLOAD, "/b.txt": second})
    monkeypatch.setattr(fetch_module, "manifest", lambda: datasets)
    monkeypatch.setattr("dpdl.data.paths.manifest", lambda: datasets)
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DPDL_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["data", "fetch", "toy", "--no-progress"]) == 0
    assert (
        tmp_path / "cache" / "toy" / "a.bin"
    ).read_bytes() == PAYLOAD  # the default destination: the cache
    assert main(["data", "fetch", "toy", "--dest", str(tmp_path), "--no-progress"]) == 0
    capsys.readouterr()
    (tmp_path / "toy" / "b.txt").write_bytes(b"damaged")
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert (
        f"  {'toy/a.bin':<45} {len(PAYLOAD):>10} bytes  sha256 ok  (DPDL_DATA_DIR: "
        f"{tmp_path / 'toy' / 'a.bin'})" in out
    )
    assert "toy/b.txt" in out and "sha256 differs from the published file" in out
    assert "handmade: handmade [missing; get it with 'dpdl data fetch handmade']" in out
    assert main(["data", "fetch", "handmade"]) == 2
    assert capsys.readouterr().err.startswith("dpdl: error: handmade cannot be fetched")


def test_survey_of_the_slices_tells_whole_files_from_slices() -> None:
    """On the test slices: SNAP's graph files are the published bytes, the MNIST slices are not,
    and the ego networks other than 414 are missing."""
    found = {status.relative: status for status in survey()}
    assert found["gnutella/p2p-Gnutella08.txt.gz"].verified is True
    assert found["facebook/ego/414.edges.gz"].verified is True  # found in its gzip layout
    if found["mnist/t10k-images-idx3-ubyte.gz"].size < 1_000_000:  # the slice, not the full file
        assert found["mnist/t10k-images-idx3-ubyte.gz"].verified is False
        assert found["facebook/ego/107.edges"].path is None
