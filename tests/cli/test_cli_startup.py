"""``dpdl --help`` starts instantly: the parser is built from :mod:`dpdl.choices` alone.

Not a timing test (that is ``benchmarks/bench_startup.py``): it checks what makes the time, that
building the parser and every command's help text imports none of the libraries that take seconds.
A fresh interpreter is needed because this one has imported them already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dpdl import choices
from dpdl.graphs.mixing import MIXING_RULES
from dpdl.mechanisms.registry import MECHANISMS

#: Libraries (and submodules) the help must not import: each costs 0.1-1.5 s here.
HEAVY = (
    "torch",
    "cvxpy",
    "dp_accounting",
    "sklearn",
    "matplotlib",
    "scipy",
    "scipy.optimize",
    "networkx",
    "cryptography",
    "tqdm",
    "ray",
)

HELP_SCRIPT = """
import json, sys
import dpdl.cli
parser = dpdl.cli.build_parser()
parser.format_help()
for command in parser._subparsers._group_actions[0].choices.values():
    command.format_help()
print(json.dumps(sorted(name for name in {heavy!r} if name in sys.modules)))
"""


def test_help_imports_no_heavy_library():
    script = HELP_SCRIPT.format(heavy=HEAVY)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(result.stdout) == []


def test_registries_offer_the_choices():
    """The parser offers the names of :mod:`dpdl.choices`; the registries must have exactly
    those."""
    assert tuple(MECHANISMS) == choices.MECHANISM_NAMES
    assert tuple(MIXING_RULES) == choices.MIXING_RULE_NAMES


@pytest.mark.parametrize(
    ("module", "missing", "extra"),
    [
        ("dpdl.solvers.coalition", "cvxpy", "solvers"),
        ("dpdl.keys", "cryptography", "runtime"),
        ("dpdl.runtime.channel", "cryptography", "runtime"),
    ],
)
def test_a_missing_optional_dependency_names_the_extra_that_installs_it(
    module: str, missing: str, extra: str
) -> None:
    # A fresh interpreter in which the optional library cannot be imported (None in sys.modules).
    code = (
        f"import sys; sys.modules[{missing!r}] = None\n"
        "from dpdl.errors import MissingDependencyError\n"
        "try:\n"
        f"    import {module}\n"
        "except MissingDependencyError as error:\n"
        "    print(error)\n"
        "else:\n"
        "    print('imported')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert f"pip install 'dpdl[{extra}]'" in out and missing in out


def test_training_and_the_coalition_free_designs_need_neither_extra(tmp_path: Path) -> None:
    # Both optional libraries blocked: a DECOR run trains and writes its results all the same.
    code = (
        "import sys; sys.modules['cryptography'] = None; sys.modules['cvxpy'] = None\n"
        "from dpdl.cli import main\n"
        "sys.exit(main(['train', '--task', 'quadratic', '--graph', 'ring', '--n', '4', "
        "'--mechanism', 'decor',"
        f" '--steps', '5', '--no-progress', '--out', {str(tmp_path / 'run')!r}]))\n"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (tmp_path / "run" / "final.json").is_file()
