"""``dpdl train --resume``: a training process killed for real (SIGKILL, mid-run) and resumed
writes the same metrics.csv and final.json, byte for byte, as a run never interrupted; the options
it is resumed with must be the run's own."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = [
    "--task", "logreg-a9a", "--mechanism", "decor", "--eps", "5", "--n", "8", "--steps", "600",
    "--eval-every", "100", "--batch-size", "16", "--seed", "0", "--no-progress",
]  # fmt: skip


def _train(*options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dpdl.cli", "train", *RUN, *options],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def _killed_at_first_checkpoint(out: Path) -> int | None:
    """Start the run into `out`, checkpointing every 20 steps, and kill it (SIGKILL) once its
    first checkpoint is written (or it ended, or 240 s passed); its exit code."""
    checkpoint = out / "checkpoints" / "seed0.npz"
    process = subprocess.Popen(
        [sys.executable, "-m", "dpdl.cli", "train", *RUN, "--out", str(out),
         "--checkpoint-every", "20"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not checkpoint.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    return process.returncode


def test_a_killed_run_resumes_to_the_same_files(tmp_path) -> None:
    whole = tmp_path / "whole"
    assert _train("--out", str(whole)).returncode == 0
    out = tmp_path / "killed"
    returncode = _killed_at_first_checkpoint(out)
    assert returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert (out / "checkpoints" / "seed0.npz").exists() and not (out / "final.json").exists()
    resumed = _train("--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    # it says where it went on from: a step the killed run had saved, before the end
    (line,) = [x for x in resumed.stderr.splitlines() if x.startswith("seed 0: resumed")]
    step = int(line.split("checkpoint at step ")[1].split()[0])
    assert 0 < step < 600 and step % 20 == 0, line
    for name in ("metrics.csv", "final.json", "config.json"):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    assert not (out / "checkpoints").exists()  # removed once the results are written


def test_resuming_with_other_options_is_one_clear_error(tmp_path) -> None:
    out = tmp_path / "run"
    _killed_at_first_checkpoint(out)
    refused = _train("--out", str(out), "--resume", "--lr", "0.5", "--eps", "4")
    assert refused.returncode != 0
    errors = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "eps was 5.0 and is 4.0" in errors[0] and "lr was" in errors[0]
    fresh = _train("--out", str(tmp_path / "empty"), "--resume")
    assert fresh.returncode != 0 and "nothing to resume" in fresh.stderr
