"""No module but the lifecycle's writer sets ``state`` on any model with a lifecycle (workloads,
reservations, dispatch attempts, escalations, quota requests, notifications, policy releases,
impact replays): every other write would bypass the lifecycle table."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "broker", "accounting", "portal", "demo", "gpubroker_cli")
THE_WRITER = ROOT / "broker" / "services" / "records" / "transitions.py"
GUARDED = {"Workload", "Reservation", "DispatchAttempt", "Escalation", "QuotaRequest", "Notification",
           "PolicyRelease", "ImpactReplay"}
# A usage record copies its job's state at the cluster (a recorded fact, not a machine).
OTHER_MACHINES = {"UsageEntry"}


def product_modules() -> list[Path]:
    return sorted(p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py") if "migrations" not in p.parts)


def _root(node: ast.AST) -> str:
    """The name a chain like ``Workload.objects.filter(...).update`` starts from."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return node.id if isinstance(node, ast.Name) else ""


def _sets_state(call: ast.Call) -> bool:
    if any(k.arg == "state" for k in call.keywords):
        return True
    return any(isinstance(a, (ast.List, ast.Tuple)) and any(
        isinstance(e, ast.Constant) and e.value == "state" for e in a.elts) for a in [*call.args, *(
            k.value for k in call.keywords if k.arg == "update_fields")])


def state_writes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, root = node.func.attr, _root(node.func.value)
            if method in {"update", "bulk_update", "save"} and _sets_state(node) and root not in OTHER_MACHINES:
                found.append((node.lineno, f"{root or '?'}...{method}(state=...)"))
            elif method in {"create", "get_or_create", "update_or_create"} and root in GUARDED \
                    and _sets_state(node):
                found.append((node.lineno, f"{root}...{method}(state=...)"))
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "state":
                    found.append((node.lineno, f"{_root(target) or '?'}.state = ..."))
    return sorted(found)


# Writers of other state machines' ``state`` the name-based check cannot tell apart.
# A row created in a state other than its default: born there (lifecycle.INITIAL_STATES), not moved.
ALLOWED = {
    ("broker/services/dispatching/multikueue_nominate.py", "Workload...create(state=...)"),
}


def test_only_the_lifecycle_service_writes_state():
    offenders = []
    for path in product_modules():
        if path == THE_WRITER:
            continue
        rel = path.relative_to(ROOT).as_posix()
        for line, what in state_writes(ast.parse(path.read_text(), filename=rel)):
            if (rel, what) not in ALLOWED:
                offenders.append(f"{rel}:{line}: {what}")
    assert offenders == [], "state written outside broker.services.records.transitions:\n" + "\n".join(offenders)


def test_the_check_sees_the_writes_it_forbids():
    code = ("Workload.objects.filter(id=1).update(state='x')\n"
            "workload.attempts.filter().update(state='x', error='')\n"
            "live.update(state='x')\n"
            "workload.state = 'x'\n"
            "Reservation.objects.create(state='x')\n"
            "w.save(update_fields=['state'])\n"
            "Notification.objects.filter(id=1).update(state='sent')\n"
            "QuotaRequest.objects.create(state='approved')\n")
    assert [line for line, _ in state_writes(ast.parse(code))] == [1, 2, 3, 4, 5, 6, 7, 8]
