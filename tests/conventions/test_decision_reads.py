"""No service reads a placement decision by key: between functions a decision is a
``PlacementRecord`` (or the library's ``Candidate``), so a service says ``decision.ranked``,
never ``decision["ranked"]`` or ``decision.get("reason")`` on a dict (a renamed key then
fails in the record, not silently in a service).  ``test_placement_reads`` guards the stored
column itself (``workload.placement[...]``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("broker/services", "accounting/services")
# the names a decision, or a piece of one, goes by in the services
DECISION_NAMES = {"placement", "decision", "record", "prior", "chosen", "best", "ranked", "excluded", "nomination"}


def _named(node: ast.AST) -> str:
    """``decision`` for ``decision``, ``x.decision`` and ``(decision or {})``."""
    if isinstance(node, ast.BoolOp):
        return next((n for n in map(_named, node.values) if n), "")
    if isinstance(node, ast.Name):
        return node.id if node.id in DECISION_NAMES else ""
    if isinstance(node, ast.Attribute):
        return node.attr if node.attr in DECISION_NAMES else ""
    return ""


def _text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def key_reads(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _text(node.slice) and (name := _named(node.value)):
            found.append((node.lineno, name))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and _text(node.args[0])
            and (name := _named(node.func.value))
        ):
            found.append((node.lineno, name))
    return sorted(found)


def test_no_service_reads_a_placement_decision_by_key():
    readers = {}
    for where in SERVICES:
        for path in sorted((ROOT / where).rglob("*.py")):
            if hits := key_reads(ast.parse(path.read_text())):
                readers[path.relative_to(ROOT).as_posix()] = hits
    assert readers == {}, f"pass the PlacementRecord and read its fields: {readers}"


def test_the_guard_sees_each_way_of_reading_a_decision_by_key():
    source = """
a = decision["ranked"]
b = decision.get("reason", "")
c = (record.placement or {}).get("manager")
d = chosen["cluster"]
e = decision.ranked[0].cluster
f = ranked[0]
g = spec["workers"]
h = decision.excluded_json()
"""
    assert key_reads(ast.parse(source)) == [(2, "decision"), (3, "decision"), (4, "placement"), (5, "chosen")]
