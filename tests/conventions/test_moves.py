"""Every move of every state machine is a named verb in one module (broker/services/records/
moves.py), the only caller of the one writer: each (row kind, reason) is written by exactly
one verb, and every reason of the lifecycle is written by some verb.  With self-tests."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from broker.lifecycle import TransitionReason

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "broker", "accounting", "portal", "demo", "gpubroker_cli")
MOVES = "broker/services/records/moves.py"
WRITER = "broker/services/records/transitions.py"
REASONS = ("Why", "TransitionReason")


def _product() -> list[tuple[str, ast.AST]]:
    found = []
    for pkg in PRODUCT:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "migrations" not in path.parts:
                rel = path.relative_to(ROOT).as_posix()
                found.append((rel, ast.parse(path.read_text(), rel)))
    return found


def writer_calls(tree: ast.AST) -> list[int]:
    """Lines that call the writer (``transition(...)``) or import it."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "transition":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("records.transitions"):
            lines += [node.lineno for alias in node.names if alias.name == "transition"]
    return lines


def verb_moves(tree: ast.AST) -> dict[tuple[str, str], list[str]]:
    """(row kind, reason) -> the verbs that write it: each ``_write(Model, to, reason, ...)`` in
    a top-level function, with every reason its reason argument can take."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for fn in getattr(tree, "body", []):
        if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
            continue
        local = {}  # name -> the reasons assigned to it in the verb (a reason chosen by a condition)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                local[node.targets[0].id] = _reasons(node.value)
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_write":
                model, reason = node.args[0], node.args[2]
                names = local.get(reason.id, set()) if isinstance(reason, ast.Name) else _reasons(reason)
                for name in names:
                    if fn.name not in found[(ast.unparse(model), name)]:
                        found[(ast.unparse(model), name)].append(fn.name)
    return found


def _reasons(expr: ast.AST) -> set[str]:
    return {
        n.attr for n in ast.walk(expr)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in REASONS
    }


def test_only_the_verbs_call_the_writer():
    offenders = [
        f"{rel}:{line}" for rel, tree in _product() if rel not in (MOVES, WRITER) for line in writer_calls(tree)
    ]
    assert offenders == [], "write a move through a verb of broker/services/records/moves.py:\n" + "\n".join(offenders)


def test_each_reason_of_each_row_kind_is_written_by_exactly_one_verb():
    moves = verb_moves(ast.parse((ROOT / MOVES).read_text()))
    twice = {key: verbs for key, verbs in moves.items() if len(verbs) > 1}
    assert twice == {}
    written = {reason for _, reason in moves}
    assert written == {r.name for r in TransitionReason}, "reasons no verb writes: " + str(
        {r.name for r in TransitionReason} - written
    )


def test_the_checks_see_a_second_writer_and_a_move_written_twice():
    code = (
        "from broker.services.records.transitions import transition\n"
        "def reserve(**rows):\n    return _write(Workload, W.RESERVED, Why.PLACED, None, rows)\n"
        "def also(**rows):\n    return _write(Workload, W.RESERVED, Why.PLACED, None, rows)\n"
        "def pick(*, ok, **rows):\n    reason = Why.A if ok else Why.B\n    return _write(Job, 'x', reason, None, rows)\n"
        "def elsewhere():\n    transition(Workload, 1, to='x', reason=Why.PLACED)\n"
    )
    tree = ast.parse(code)
    assert writer_calls(tree) == [1, 10]
    moves = verb_moves(tree)
    assert moves[("Workload", "PLACED")] == ["reserve", "also"]
    assert moves[("Job", "A")] == ["pick"] and moves[("Job", "B")] == ["pick"]
