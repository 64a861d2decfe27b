"""The time dpdl estimates for a job before it starts, against the time the job then takes (issue
47, item 3: every logged estimate within 2x).

Each case is one ``dpdl -v train`` (or ``dpdl -v noise``) command in a fresh process; the estimate
is the "about X for N steps" of its INFO line ``estimated ...`` (:mod:`dpdl.jobspec.resources`),
the time the command's wall clock from start to exit (imports, data, design, steps and
evaluations: what the user waits for). The ratio is the larger over the smaller, so 2.0 is the
bound either way.

Run from the repository root with the full data folder set (``DPDL_DATA_DIR``), on a quiet
machine: ``.venv/bin/python benchmarks/bench_estimates.py`` (about 5 minutes on 2 cores). Writes
the section between ``<!-- bench_estimates:start -->`` and ``<!-- bench_estimates:end -->`` of
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import markers, measured, write_section

ROOT = Path(__file__).resolve().parent.parent
DPDL = [sys.executable, "-m", "dpdl.cli", "-v"]
#: (label, arguments after ``dpdl -v``) of each case.
CASES = [
    ("a9a logistic regression, 20 agents, LDP, 2000 steps",
     ["train", "--task", "logreg-a9a", "--graph", "er", "--n", "20", "--steps", "2000"]),
    ("a9a, Facebook (4039 agents), LDP, 200 steps",
     ["train", "--task", "logreg-a9a", "--graph", "facebook", "--steps", "200"]),
    ("a9a, Facebook (4039 agents), DECOR, 200 steps",
     ["train", "--task", "logreg-a9a", "--graph", "facebook", "--mechanism", "decor", "--steps",
      "200"]),
    ("DECOR's design alone, Facebook (dpdl noise)",
     ["noise", "--method", "decor", "--graph", "facebook"]),
    ("least squares, Erdos-Renyi 100,000 agents (p = 0.0002), LDP, 100 steps",
     ["train", "--task", "least-squares", "--graph", "er", "--n", "100000", "--p", "0.0002",
      "--steps", "100"]),
    ("Whisper, quadratic, ring of 200 agents, 500 steps",
     ["train", "--task", "quadratic", "--graph", "ring", "--n", "200", "--mechanism", "whisper",
      "--steps", "500"]),
    ("MNIST MLP, 16 agents, example level, 300 steps",
     ["train", "--task", "mnist-mlp", "--graph", "ring", "--n", "16", "--clip-level", "example",
      "--steps", "300", "--eval-every", "100"]),
    ("MNIST LeNet, 16 agents, 100 steps",
     ["train", "--task", "mnist-lenet", "--graph", "ring", "--n", "16", "--steps", "100",
      "--eval-every", "50"]),
    ("MNIST CNN, 148 agents, 3 steps and an evaluation",
     ["train", "--task", "mnist-cnn", "--graph", "er", "--n", "148", "--p", "0.05", "--steps",
      "3", "--eval-every", "3"]),
]  # fmt: skip

_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0, "days": 86400.0, "years": 365.25 * 86400.0}
_ESTIMATE = re.compile(r"about ([0-9.e+]+) (s|min|h|days|years) for")


def _estimated(stderr: str) -> float | None:
    found = _ESTIMATE.findall(stderr)
    if not found:
        return None
    value, unit = found[-1]
    return float(value) * _UNITS[unit]


def _run(arguments: list[str], folder: Path) -> tuple[float | None, float, str]:
    """(estimated seconds, seconds taken, error or "") of one command."""
    out = ["--out", str(folder / "out")] if arguments[0] == "train" else []
    start = time.perf_counter()
    done = subprocess.run(
        [*DPDL, *arguments, *out, "--no-progress"] if arguments[0] == "train" else
        [*DPDL, *arguments], capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    error = "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]
    return _estimated(done.stderr), seconds, error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases whose label holds this text")
    args = parser.parse_args()
    rows = []
    for label, arguments in CASES:
        if args.only and args.only not in label:
            continue
        with tempfile.TemporaryDirectory() as folder:
            estimated, seconds, error = _run(arguments, Path(folder))
        if estimated is None:
            rows.append(f"| {label} | none logged | {seconds:.1f} | | {error} |")
        else:
            ratio = max(estimated, seconds) / min(estimated, seconds)
            verdict = "within 2x" if ratio <= 2 else "NOT within 2x"
            rows.append(
                f"| {label} | {estimated:.1f} | {seconds:.1f} | {ratio:.2f} | {verdict} {error} |"
            )
        print(rows[-1], flush=True)
    start, end = markers("bench_estimates")
    text = "\n".join([
        start,
        "## Estimates against runs (`benchmarks/bench_estimates.py`)",
        "",
        "Each case one `dpdl -v` command in a fresh process: the time its INFO line estimated "
        "before the work, against its wall clock from start to exit. " + measured("dpdl CLI"),
        "",
        "| case | estimated (s) | took (s) | ratio | |",
        "|---|---:|---:|---:|---|",
        *rows,
        end,
        "",
    ])  # fmt: skip
    print(text)
    if not args.only:
        write_section(text, start, end)


if __name__ == "__main__":
    main()
