"""The reproductions' docstrings are Markdown: a module's is the intro of its REPORT.md and its
first line the summary `dpdl reproduce --list` prints; no reStructuredText left in them (the
library's docstrings are checked by tests/test_docstrings.py, the same way)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "dpdl_reproductions"
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


def test_no_docstring_holds_rest() -> None:
    found = [
        f"{path.relative_to(ROOT.parents[2])}:{line}: {', '.join(rest)}"
        for path in sorted(ROOT.rglob("*.py"))
        for line, text in docstrings(ast.parse(path.read_text(encoding="utf-8")))
        if (rest := rest_in(text))
    ]
    assert not found, "reST in docstrings (write Markdown):\n" + "\n".join(found)
