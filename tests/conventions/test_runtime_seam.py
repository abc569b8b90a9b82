"""One runtime seam (broker/runtime.py): services ask it for the time, every after-commit
follow-up goes through the one task bridge, and no other module keeps a seam of its own
(a module global rebound from a function, a context variable, a library function swapped).
Each rule has a self-test showing it sees what it forbids."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "broker", "accounting", "portal", "demo", "gpubroker_cli")
# the service packages: they read the broker's clock, never the wall's
SERVICES = ("broker/services", "accounting/services", "broker/policyrelease/services")
# the broker's models: their timestamps come from the runtime clock, not auto_now
BROKER_MODELS = ("broker/models", "broker/policyrelease/models.py", "broker/api/models.py")
CLOCK_OWNERS = {"timezone", "dj_timezone", "datetime", "dt", "date", "time"}
WALL_READS = {"now", "utcnow", "today", "time", "sleep", "monotonic"}
RUNTIME = "broker/runtime.py"
# modules that set something of another module, and why that is no seam of the product's
NOT_A_SEAM = {
    "broker/faults/harness.py": "test tooling: a harness run against a real Slurm turns its backend on, and back off",
    "broker/faults/worker.py": "test tooling: hands the worker's arguments to Celery's own main (sys.argv)",
    "broker/logcontext.py": "the ids a log line carries (request, workload): per request or task, read by logging only",
}
BRIDGE = "broker/services/records/tasks_bridge.py"


def _modules(*roots: str) -> list[tuple[str, ast.AST]]:
    found = []
    for root in roots:
        base = ROOT / root
        paths = [base] if base.suffix == ".py" else sorted(base.rglob("*.py"))
        for path in paths:
            if "migrations" in path.parts:
                continue
            name = path.relative_to(ROOT).as_posix()
            found.append((name, ast.parse(path.read_text(), name)))
    return found


def _wall_clock_reads(tree: ast.AST) -> list[int]:
    """``timezone.now()``, ``datetime.now(...)``, ``time.sleep``, ``default=timezone.now``,
    ``from django.utils.timezone import now``: every way of reaching the wall's clock."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in WALL_READS:
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in CLOCK_OWNERS:
                lines.append(node.lineno)
            elif isinstance(owner, ast.Attribute) and owner.attr in CLOCK_OWNERS:  # datetime.datetime.now
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in ("django.utils.timezone", "time"):
            if any(alias.name in WALL_READS for alias in node.names):
                lines.append(node.lineno)
    return lines


def _after_commit_hooks(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "on_commit":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and any(alias.name == "on_commit" for alias in node.names):
            lines.append(node.lineno)
    return lines


def _auto_now(tree: ast.AST) -> list[int]:
    return [
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.keyword) and node.arg in ("auto_now", "auto_now_add")
        and not (isinstance(node.value, ast.Constant) and node.value.value is False)
    ]


def _own_seams(tree: ast.AST) -> list[int]:
    """A module global rebound from a function (``global x``), a context variable, or an
    attribute of an imported module assigned (``timezone.now = ...``)."""
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in ("ContextVar", "local") and isinstance(
                node.value, ast.Name) and node.value.id in ("contextvars", "threading"):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in ("contextvars", "threading") and any(
                alias.name in ("ContextVar", "local") for alias in node.names):
            lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id in imported:
                    lines.append(node.lineno)
    return lines


def test_services_read_the_time_from_the_runtime_never_from_the_wall():
    readers = {name: lines for name, tree in _modules(*SERVICES) if (lines := _wall_clock_reads(tree))}
    assert not readers, f"ask broker.runtime (runtime.now(), runtime.sleep()) instead: {readers}"


def test_only_the_runtime_and_the_task_bridge_hook_the_commit():
    hooks = {
        name: lines for name, tree in _modules(*PRODUCT)
        if name not in (RUNTIME, BRIDGE) and (lines := _after_commit_hooks(tree))
    }
    assert not hooks, f"send follow-ups through broker/services/records/tasks_bridge.py: {hooks}"


def test_broker_timestamps_come_from_the_runtime_clock_not_auto_now():
    stamped = {name: lines for name, tree in _modules(*BROKER_MODELS) if (lines := _auto_now(tree))}
    assert not stamped, f"use broker.models.fields (created_at_field, TouchedAtField): {stamped}"


def test_no_module_but_the_runtime_keeps_a_seam_of_its_own():
    seams = {
        name: lines for name, tree in _modules(*PRODUCT)
        if name != RUNTIME and name not in NOT_A_SEAM and (lines := _own_seams(tree))
    }
    assert not seams, f"put the seam in broker/runtime.py (a field of Runtime, runtime.override): {seams}"


# -- self-tests: each guard sees what it forbids, and not what it allows ---------------------

def test_the_clock_guard_sees_each_wall_read_and_not_the_runtime():
    for source in ("from django.utils import timezone\ntimezone.now()",
                   "from datetime import datetime, timezone\ndatetime.now(timezone.utc)",
                   "import datetime\ndatetime.datetime.now()", "from datetime import date\ndate.today()",
                   "from django.utils.timezone import now", "import time\ntime.sleep(1)",
                   "from django.utils import timezone\nf = models.DateTimeField(default=timezone.now)",
                   "from django.utils import timezone as dj_timezone\ndj_timezone.now()"):
        assert _wall_clock_reads(ast.parse(source)), source
    for source in ("from broker import runtime\nruntime.now()", "runtime.sleep(2)",
                   "from django.utils import timezone\ntimezone.localdate(now)", "workload.now"):
        assert _wall_clock_reads(ast.parse(source)) == [], source


def test_the_commit_guard_sees_each_hook_and_not_the_bridge():
    for source in ("from django.db import transaction\ntransaction.on_commit(f)",
                   "from django.db.transaction import on_commit", "connection.on_commit(f)"):
        assert _after_commit_hooks(ast.parse(source)), source
    assert _after_commit_hooks(ast.parse("tasks_bridge.enqueue_place(1)\nnotify_on_commit(workload_id=1)")) == []


def test_the_auto_now_guard_sees_both_flags_and_not_the_runtime_fields():
    for source in ("models.DateTimeField(auto_now=True)", "models.DateTimeField(auto_now_add=True)"):
        assert _auto_now(ast.parse(source)), source
    assert _auto_now(ast.parse("created_at_field()\nTouchedAtField()\nmodels.DateTimeField(auto_now=False)")) == []


def test_the_seam_guard_sees_a_global_a_context_variable_and_a_swap():
    for source in ("_sink = None\ndef set(s):\n    global _sink\n    _sink = s",
                   "import contextvars\nv = contextvars.ContextVar('v')", "from contextvars import ContextVar",
                   "import threading\nstate = threading.local()",
                   "from django.utils import timezone\ntimezone.now = fake", "import time\ntime.sleep = fake"):
        assert _own_seams(ast.parse(source)), source
    for source in ("from broker import runtime\nwith runtime.override(now=clock):\n    pass",
                   "self.now = clock", "import threading\nlock = threading.Lock()", "_cache: dict = {}"):
        assert _own_seams(ast.parse(source)) == [], source
