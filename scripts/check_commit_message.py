"""The commit-msg hook (.pre-commit-config.yaml): a commit's subject is at most 72 characters and
starts with a scope prefix (``accounting: ``, ``decor-fig1: ``), and a body, if any, is set apart by
a blank line (docs/contributing.md, "Commits").

Usage: ``python scripts/check_commit_message.py MESSAGE_FILE`` (git passes the file); exit status 1
with one line saying what is wrong. Standard library only, so the hook needs no environment.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: The longest subject line.
MAX_SUBJECT = 72

#: ``scope: text``: a lower-case scope (letters, digits, ``-_/.``), a colon, a space.
SUBJECT = re.compile(r"^[a-z0-9][a-z0-9_./-]*: \S")


def problems(message: str) -> list[str]:
    """What is wrong with the commit message ``message`` (git's comment lines ignored)."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ["the message is empty"]
    subject, found = lines[0], []
    if subject.startswith(("Merge ", "Revert ", "fixup! ", "squash! ")):
        return []
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject is {len(subject)} characters; at most {MAX_SUBJECT}")
    if not SUBJECT.match(subject):
        found.append("the subject starts with a scope prefix, e.g. 'accounting: ' or 'sweeps: '")
    if len(lines) > 1 and lines[1].strip():
        found.append("a blank line sets the body apart from the subject")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_commit_message.py MESSAGE_FILE", file=sys.stderr)
        return 2
    found = problems(Path(argv[1]).read_text(encoding="utf-8", errors="replace"))
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
