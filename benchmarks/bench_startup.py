"""Benchmark of the command line's start: ``dpdl --help`` and ``dpdl train --help`` against
``python -c "import numpy"``, and against the previous way, side by side in one run; and one short
real command, ``dpdl noise`` (DECOR on a ring of 6 agents, T = 100), whose implementation now
imports what it uses (networkx, scipy) and not torch, matplotlib or dp_accounting.

Each command is a fresh interpreter (``python -m dpdl.cli ...``, with this checkout's ``src`` first
on ``PYTHONPATH``), timed wall clock from start to exit. The commands take turns, round after round,
so a burst of load on a shared machine hits all of them alike; the table gives the minimum and the
median of each.

The previous way is the same help after importing what the parser imported before its names moved
to :mod:`dpdl.choices`: every dpdl module (the runtime, attacks, tasks, experiments and mechanisms
packages, each of which imported all its submodules) and with them torch, cvxpy, dp_accounting,
scipy, sklearn, matplotlib, networkx, cryptography and tqdm. :data:`PREVIOUS_IMPORTS` names modules
whose imports cover that set, so the replay costs what the previous parser cost even after those
modules import some libraries only where they use them.

Figures go to stdout and to the ``bench_startup`` section of ``BENCHMARKS.md``. Run from the
repository root: ``.venv/bin/python benchmarks/bench_startup.py`` (about two minutes).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _report import markers, measured, write_section  # benchmarks/_report.py

#: Rounds of the fast commands; the slow ones (the previous way: 5-8 s a start) run in the first
#: :data:`SLOW_ROUNDS`.
ROUNDS, SLOW_ROUNDS = 20, 5
START, END = markers("bench_startup")
SRC = Path(__file__).resolve().parent.parent / "src"

#: What ``dpdl.cli`` imported before the parser was built from :mod:`dpdl.choices` alone.
PREVIOUS_IMPORTS = (
    "dpdl.accounting.calibration",
    "dpdl.attacks.eavesdropper",
    "dpdl.attacks.inversion",
    "dpdl.experiments.demo",
    "dpdl.experiments.results",
    "dpdl.mechanisms.registry",
    "dpdl.runtime.handshake",
    "dpdl.runtime.launch",
    "dpdl.simulation.tracking",
    "dpdl.solvers.coalition",
    "dpdl.tasks.catalog",
    "cryptography.hazmat.primitives.ciphers.aead",
    "dp_accounting",
    "matplotlib.pyplot",
    "networkx",
    "scipy.optimize",
    "scipy.signal",
    "scipy.stats",
    "sklearn.datasets",
    "sklearn.preprocessing",
    "torch",
    "tqdm.auto",
)


#: A real command that takes well under a second once its imports are done.
NOISE = [
    "noise",
    "--method",
    "decor",
    "--graph",
    "ring",
    "--n",
    "6",
    "--eps",
    "10",
    "--delta",
    "1e-5",
    "--steps",
    "100",
    "--clip",
    "0.1",
]


def previous(argv: list[str]) -> list[str]:
    """``dpdl ARGV`` after the previous parser's imports."""
    return [
        sys.executable,
        "-c",
        f"import {', '.join(PREVIOUS_IMPORTS)}; from dpdl.cli import main; main({argv!r})",
    ]


#: Label -> (command, whether it is the previous way).
COMMANDS: dict[str, tuple[list[str], bool]] = {
    'python -c "pass"': ([sys.executable, "-c", "pass"], False),
    'python -c "import numpy"': ([sys.executable, "-c", "import numpy"], False),
    "dpdl --help": ([sys.executable, "-m", "dpdl.cli", "--help"], False),
    "dpdl train --help": ([sys.executable, "-m", "dpdl.cli", "train", "--help"], False),
    "dpdl noise": ([sys.executable, "-m", "dpdl.cli", *NOISE], True),
    "dpdl --help, previous imports": (previous(["--help"]), True),
    "dpdl train --help, previous imports": (previous(["train", "--help"]), True),
    "dpdl noise, previous imports": (previous(NOISE), True),
}


def wall(command: list[str], env: dict[str, str]) -> float:
    """Seconds from starting ``command`` to its exit (which must be 0)."""
    start = time.perf_counter()
    subprocess.run(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )
    return time.perf_counter() - start


def main() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
    }
    times: dict[str, list[float]] = {label: [] for label in COMMANDS}
    for round_ in range(ROUNDS):
        for label, (command, slow) in COMMANDS.items():
            if not slow or round_ < SLOW_ROUNDS:
                times[label].append(wall(command, env))
    best = {label: min(values) for label, values in times.items()}
    numpy = best['python -c "import numpy"']
    lines = [
        START,
        "## Start of the command line (`benchmarks/bench_startup.py`)",
        "",
        "Wall clock of a fresh interpreter from start to exit, the commands taking turns "
        f"({ROUNDS} rounds, {SLOW_ROUNDS} for `dpdl noise` and the previous imports). `dpdl noise` "
        f"is `dpdl {' '.join(NOISE)}`. The previous imports replay what `dpdl.cli` imported before "
        "the parser was built from `dpdl.choices` alone (torch, cvxpy, dp_accounting, scipy, "
        "sklearn, matplotlib, networkx, cryptography, tqdm and every dpdl module).",
        "",
        "| command | runs | min (s) | median (s) | min / import numpy |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, values in times.items():
        lines.append(
            f"| `{label}` | {len(values)} | {best[label]:.3f} | {statistics.median(values):.3f} | "
            f"{best[label] / numpy:.2f}x |"
        )
    for command in ("dpdl --help", "dpdl train --help", "dpdl noise"):
        old, new = times[f"{command}, previous imports"], times[command]
        lines.append(
            f"\n`{command}` is {min(old) / min(new):.1f}x faster than with the previous imports "
            f"(medians: {statistics.median(old) / statistics.median(new):.1f}x)."
        )
    lines += ["", measured(f"numpy {__import__('numpy').__version__}"), END]
    text = "\n".join(lines) + "\n"
    print(text)
    write_section(text, START, END)


if __name__ == "__main__":
    main()
