"""The broker's side of the production-loop replay learns about the fleet only as production
does, from its own syncs and polls: the modules that run it import nothing of the
simulator's state, the harness's tracker, its view of the fleet or its loop, and never set a
job's run time (the harness alone does, as a cluster's users do by running their code).

Checked on the strategy's modules and every ``broker.replay`` module they import, directly or
through another; what they reach through the product (the backend registry builds a
simulated cluster's backend as it builds any other) is the product's own path."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STRATEGY = ("broker.replay.production_broker", "broker.replay.broker_setup")
FORBIDDEN = (
    "broker.backends.sim",  # the simulator's own state
    "broker.replay.tracker",
    "broker.replay.simview",
    "broker.replay.loop",
    "broker.replay.production",
    "broker.replay.local_jobs",
)
FORBIDDEN_CALLS = ("set_duration",)


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def truth_reads(source: str) -> list[str]:
    """What in this source reads the simulator's truth or the harness, or sets a run time."""
    tree = ast.parse(source)
    found = [n for n in _imports(tree) if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)]
    found += [
        f"call {node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FORBIDDEN_CALLS
    ]
    return found


def _source(module: str) -> str | None:
    path = ROOT / (module.replace(".", "/") + ".py")
    return path.read_text() if path.exists() else None


def test_the_strategy_and_the_replay_modules_it_imports_read_no_simulator_truth():
    seen: set[str] = set()
    todo, found = list(STRATEGY), {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        source = _source(module)
        assert source is not None or module not in STRATEGY, module
        if source is None:
            continue
        if reads := truth_reads(source):
            found[module] = reads
        todo += [n for n in _imports(ast.parse(source)) if n.startswith("broker.replay.")]
    assert not found, f"the broker's side of the replay reads what production cannot know: {found}"
    assert "broker.replay.jobs" in seen  # the walk followed the strategy's own replay imports


def test_the_guard_sees_each_way_of_reaching_the_truth():
    source = """
from broker.replay.tracker import Tracker
import broker.backends.sim.cluster
from broker.backends import sim
from broker.replay import simview
env.sim.set_duration(uid, 60.0)
from broker.services.fleet.inventory import cluster_sync_inventory
"""
    assert truth_reads(source) == [
        "broker.replay.tracker", "broker.replay.tracker.Tracker", "broker.backends.sim.cluster",
        "broker.backends.sim", "broker.replay.simview", "call set_duration",
    ]  # fmt: skip
