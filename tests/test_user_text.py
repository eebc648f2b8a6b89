"""Provides the check that no text a user reads carries a rule id of the specification: every string
literal in foya_tui (notices, reasons, CLI lines, help, notifications, simulator errors) except
docstrings, which cite rules for developers, as comments do. The README and --help are checked
too (tests/runtime/test_cli_help.py checks `foya --help` itself)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "foya_tui"
RULE_ID = re.compile(r"\bSPEC\b|\b[VHXIBCTPRK]-\d+\b")
"""`SPEC`, or a rule id such as `C-11` or `R-2` (SPEC.md's sections: V, H, X, I, B, C, T, P, R, K)."""


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings: the first statement of a module, class
    or function, and the attribute docstrings that follow an assignment."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for index, statement in enumerate(body):
            if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)):
                continue
            if isinstance(statement.value.value, str) and (
                index == 0 or isinstance(body[index - 1], (ast.Assign, ast.AnnAssign))
            ):
                found.add(id(statement.value))
    return found


def rule_ids_in_user_text(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    skip = docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and RULE_ID.search(node.value)
    ]


def test_no_string_a_user_reads_carries_a_rule_id() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text[:80]!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in rule_ids_in_user_text(path.read_text(encoding="utf-8"))
    ]
    assert not found, "rule ids in user-facing text:\n" + "\n".join(found)


def test_the_check_finds_a_rule_id_in_a_message_and_not_in_a_docstring() -> None:
    source = '"""Provides X (SPEC C-1)."""\ndef f():\n    """Cites K-9."""\n    raise E(f"big ({n}, K-9)")\n'
    assert [line for line, _ in rule_ids_in_user_text(source)] == [4]


def test_the_readme_says_no_rule_id_outside_its_developer_notes() -> None:
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    user_part = readme.split("## Develop", 1)[0]
    assert not RULE_ID.findall(user_part)
