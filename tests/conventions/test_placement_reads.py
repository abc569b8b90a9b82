"""The placement record is read typed: ``Workload.placement`` is a JSON column, and every
reader goes through ``PlacementRecord.from_json``, so no module picks keys out of the dict
(a renamed key would then fail in one place, the record, not silently in five)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {
    "broker/placement/record.py": "the record itself: the one reader of the stored keys",
}
# the simulator's jobs have a ``placement`` of their own (the nodes a job runs on), no record
OTHER_PLACEMENTS = ("broker/backends/sim/",)
TEMPLATE_READ = re.compile(r"\{\{[^}]*\.placement\.|\{%[^%]*\.placement\.")


def _is_placement(node: ast.AST) -> bool:
    """``x.placement``, also as ``(x.placement or {})``."""
    if isinstance(node, ast.BoolOp):
        return any(_is_placement(v) for v in node.values)
    return isinstance(node, ast.Attribute) and node.attr == "placement"


def key_reads(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_placement(node.value):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "items", "keys", "values")
            and _is_placement(node.func.value)
        ):
            lines.append(node.lineno)
    return lines


def test_no_broker_module_but_the_record_reads_the_placement_dict_by_key():
    readers = {}
    for path in (ROOT / "broker").rglob("*.py"):
        name = path.relative_to(ROOT).as_posix()
        if "migrations" in path.parts or name in ALLOWED or name.startswith(OTHER_PLACEMENTS):
            continue
        lines = key_reads(ast.parse(path.read_text(), name))
        if lines:
            readers[name] = lines
    assert not readers, f"these read Workload.placement by key; use PlacementRecord.from_json: {readers}"


def test_no_template_reads_the_placement_dict_by_key():
    readers = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "templates").rglob("*.html")
        if TEMPLATE_READ.search(path.read_text())
    ]
    assert not readers, f"these templates read Workload.placement by key; pass a typed value from the view: {readers}"


def test_the_guard_sees_each_way_of_reading_by_key():
    source = """
a = w.placement["chosen"]
b = (w.placement or {}).get("manager", "")
c = list(w.placement.items())
d = PlacementRecord.from_json(w.placement).chosen
"""
    assert key_reads(ast.parse(source)) == [2, 3, 4]
