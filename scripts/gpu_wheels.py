"""The wheels the GPU check needs on a device machine (``make gpu-wheels``): what dpdl imports that
the machines' image lacks, for Python 3.12 on manylinux x86_64, at the versions installed here.

The device machines lent to this project (an H100 or an H200) have Python 3.12, torch, numpy,
scipy, networkx, scikit-learn, matplotlib, tqdm, pytest and more preinstalled, and no network
(``/work/.library/device/KINDS.md`` lists the image's packages): dp-accounting and what it needs
beyond the image (dm-tree; attrs below 24), tomli-w, platformdirs and, for the runtime's keys,
cryptography with cffi and pycparser travel as wheels. ``make gpu-check`` installs them, when the
folder holds them, into a folder of their own put first on ``PYTHONPATH``.

    python scripts/gpu_wheels.py [FOLDER]    # default .whl (ignored by git)
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

#: What the image lacks, by distribution name (its version: the one installed here).
CARRIED = (
    "dp-accounting",
    "dm-tree",
    "attrs",
    "tomli-w",
    "platformdirs",
    "cryptography",
    "cffi",
    "pycparser",
)
#: manylinux tags pip matches exactly, newest first (the device README's list).
PLATFORMS = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_17", "manylinux2014", "manylinux1")


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else ".whl")
    folder.mkdir(exist_ok=True)
    platforms = [f"--platform={tag}_x86_64" for tag in PLATFORMS]
    for name in CARRIED:
        pinned = f"{name}=={version(name)}"
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
            *platforms, "-d", str(folder), pinned,
        ]  # fmt: skip
        if subprocess.run(command, check=False).returncode != 0:
            print(f"no wheel of {pinned} for Python 3.12 on manylinux x86_64", file=sys.stderr)
            return 1
    wheels = ", ".join(path.name for path in sorted(folder.glob("*.whl")))
    print(f"{len(CARRIED)} wheels in {folder}: {wheels}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
