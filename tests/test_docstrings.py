"""The docstrings are Markdown, which mkdocstrings renders (docs/contributing.md): no
reStructuredText left in them, which the site would show raw (`make docs` checks the built pages
too: scripts/check_site.py). The reproductions' docstrings are scanned the same way: a module's is
the intro of its REPORT.md and its first line the summary `dpdl reproduce --list` prints."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = [REPO / "src" / "dpdl", REPO / "reproductions" / "src" / "dpdl_reproductions"]
#: reST that Markdown shows raw: a Sphinx role, a field list, an inline literal in double
#: backticks (Markdown's `` `x` `` pads code that holds a backtick), a paragraph ending in `::`.
REST = {
    "a Sphinx role": re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|const|math|ref):`"),
    "a reST field list": re.compile(r"^\s*:(?:param|type|returns?|rtype|raises?)\b", re.M),
    "double backticks": re.compile(r"(?<!`)``[^`\s](?:[^`]*[^`\s])?``(?!`)"),
    "a reST literal block (::)": re.compile(r"::[ \t]*$", re.M),
}
FENCE = re.compile(r"^\s*```.*?^\s*```", re.M | re.S)


def docstrings(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """The docstrings of a module, its classes and functions, and its attributes (a string right
    after an assignment), with their lines."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for index, statement in enumerate(body):
            is_doc = index == 0 or isinstance(body[index - 1], ast.Assign | ast.AnnAssign)
            if (
                is_doc
                and isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                yield statement.lineno, statement.value.value


def rest_in(text: str) -> list[str]:
    """What reST `text` holds, outside fenced code blocks."""
    prose = FENCE.sub("", text)
    return [what for what, pattern in REST.items() if pattern.search(prose)]


@pytest.mark.parametrize(
    "text",
    [
        "Calls :func:`dpdl.fit`.",
        "The ``steps`` argument.",
        "Example::\n\n    fit(model)\n",
        "Args.\n\n:param steps: how many.",
    ],
)
def test_the_scan_finds_rest(text: str) -> None:
    assert rest_in(text)


@pytest.mark.parametrize(
    "text",
    [
        "Calls [`fit`][dpdl.experiments.fit.fit], with `steps`; `` `x` `` holds a backtick.",
        "Example:\n\n```python\nx = {'a': 1}  # a::b\n```\n",
    ],
)
def test_the_scan_leaves_markdown_alone(text: str) -> None:
    assert not rest_in(text)


@pytest.mark.parametrize("root", SOURCES, ids=lambda root: root.name)
def test_no_docstring_holds_rest(root: Path) -> None:
    assert any(root.rglob("*.py")), root
    found = [
        f"{path.relative_to(REPO)}:{line}: {', '.join(rest)}"
        for path in sorted(root.rglob("*.py"))
        for line, text in docstrings(ast.parse(path.read_text(encoding="utf-8")))
        if (rest := rest_in(text))
    ]
    assert not found, "reST in docstrings (write Markdown):\n" + "\n".join(found)
