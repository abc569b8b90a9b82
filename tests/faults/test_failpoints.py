"""The named failpoints (broker/failpoints.py): a fixed list, each called where the
service can be crashed, a no-op unless armed; the crash points of the harness reach every
one of them; and no product module imports the fault tooling."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from broker import runtime
from broker.failpoints import FAILPOINTS, UnknownFailpoint, armed, failpoint
from broker.faults.multikueue import MULTIKUEUE_POINTS
from broker.faults.points import CRASH_POINTS, FaultPlan, hooks_matching

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "broker", "accounting", "portal", "demo", "gpubroker_cli")


def _product_modules() -> list[Path]:
    return [path for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))
            if "faults" not in path.relative_to(ROOT).parts[:2] and "migrations" not in path.parts]


def _failpoint_calls() -> list[tuple[str, object]]:
    """(module, first argument) of every ``failpoint(...)`` call in the product."""
    calls = []
    for path in _product_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "failpoint":
                arg = node.args[0] if node.args else None
                calls.append((str(path.relative_to(ROOT)), arg.value if isinstance(arg, ast.Constant) else arg))
    return calls


def test_every_listed_failpoint_is_called_in_the_product_and_every_call_names_a_listed_one():
    calls = _failpoint_calls()
    names = [name for _, name in calls]
    assert all(isinstance(name, str) and name in FAILPOINTS for name in names), calls
    assert set(names) == set(FAILPOINTS), calls


def test_each_failpoint_sits_in_the_module_its_description_names():
    for module, name in _failpoint_calls():
        assert FAILPOINTS[name].split(":")[0] == module.removeprefix("broker/"), (name, module)


def test_an_unarmed_failpoint_does_nothing():
    assert runtime.current().failpoints == {}
    for name in FAILPOINTS:
        failpoint(name)


def test_an_armed_failpoint_runs_its_action_and_disarms_when_the_block_ends():
    seen: list[str] = []
    with armed({"cancel.before_send": seen.append}):
        failpoint("cancel.before_send")
        failpoint("cancel.after_send")
    failpoint("cancel.before_send")
    assert seen == ["cancel.before_send"]
    assert runtime.current().failpoints == {}


def test_nested_arming_wins_while_it_lasts_and_the_outer_comes_back():
    seen: list[str] = []
    with armed({"status.after_poll": lambda n: seen.append("outer")}):
        with armed({"status.after_poll": lambda n: seen.append("inner")}):
            failpoint("status.after_poll")
        failpoint("status.after_poll")
    assert seen == ["inner", "outer"]


def test_arming_a_name_that_is_not_listed_is_refused_and_arms_nothing():
    with pytest.raises(UnknownFailpoint, match="dispatch.after_sumbit"):
        with armed({"dispatch.after_submit": print, "dispatch.after_sumbit": print}):
            pass  # pragma: no cover
    assert runtime.current().failpoints == {}


def test_a_fault_plan_refuses_a_hook_that_names_no_failpoint_or_destination_call():
    plan = FaultPlan()
    with pytest.raises(ValueError, match="reconcile.after_expiry"):
        plan.arm("typo", hook="reconcile.after_expiry")
    assert plan.armed == []


def test_the_harness_crash_points_reach_every_failpoint_but_the_multikueue_dispatchers():
    by_harness = {h for p in CRASH_POINTS if p.hook and p.hook != "*" for h in hooks_matching(p.hook)}
    by_multikueue = {h for p in MULTIKUEUE_POINTS for h in hooks_matching(p.hook)}
    assert by_harness & set(FAILPOINTS) == {n for n in FAILPOINTS if not n.startswith("multikueue.")}
    assert by_multikueue == {n for n in FAILPOINTS if n.startswith("multikueue.")}


def test_no_product_module_imports_the_fault_tooling():
    found = []
    for path in _product_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith("broker.faults")]
    assert found == []
