"""One path per step: a single workload is a batch of one.  The single-workload task and the
waiting pass reach the same placing service (``place_in_pass``); placing one workload takes
its cycle (no ``shared=None`` mode) and sending an attempt takes what was read for it (no
``known=None`` mode); the status poll and the MultiKueue pass apply what a job did through
the same service.  With self-tests."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASKS = "broker/tasks.py"
PLACING = "broker/services/placing/cycle.py"
SENDING = "broker/services/dispatching/send.py"
POLL = "broker/services/following/status.py"
MULTIKUEUE = "broker/services/dispatching/multikueue.py"


def _tree(rel: str) -> ast.Module:
    return ast.parse((ROOT / rel).read_text(), rel)


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise AssertionError(f"no function {name}")


def calls(fn: ast.FunctionDef) -> set[str]:
    return {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(fn)
        if isinstance(node, ast.Call)
    }


def optional_params(fn: ast.FunctionDef) -> set[str]:
    """Parameters that default to None: a second mode of the same step."""
    args = fn.args
    positional = args.posonlyargs + args.args
    with_defaults = list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) + [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None
    ]
    return {a.arg for a, d in with_defaults if isinstance(d, ast.Constant) and d.value is None}


def test_the_single_workload_task_and_the_pass_call_the_same_placing_service():
    assert "workload_place" in calls(_function(_tree(TASKS), "place_workload"))
    assert "waiting_place_pass" in calls(_function(_tree(TASKS), "place_waiting"))
    placing = _tree(PLACING)
    assert "place_in_pass" in calls(_function(placing, "workload_place"))
    assert "place_in_pass" in calls(_function(placing, "waiting_place_pass"))


def test_placing_one_takes_its_cycle_and_sending_takes_what_was_read():
    place_one = _function(_tree(PLACING), "place_one")
    assert "shared" not in {a.arg for a in place_one.args.args + place_one.args.kwonlyargs}
    assert optional_params(place_one) == set()
    assert "known" not in optional_params(_function(_tree(SENDING), "attempt_send"))


def test_the_status_poll_and_the_multikueue_pass_follow_a_job_through_one_service():
    assert "workload_apply_status" in calls(_function(_tree(POLL), "cluster_poll_status"))
    multikueue = _tree(MULTIKUEUE)
    for step in ("_admitted", "_ended"):  # a worker admitted it; it ended there
        found = calls(_function(multikueue, step))
        assert "workload_apply_status" in found, step
        assert not {"started", "ended"} & found, f"{step} writes the move itself"


def test_the_checks_see_a_second_mode():
    tree = ast.parse("def place_one(w, *, now, shared=None):\n    place_in_pass(w)\n"
                     "def attempt_send(w, a, known=None):\n    pass\n")
    assert optional_params(_function(tree, "place_one")) == {"shared"}
    assert optional_params(_function(tree, "attempt_send")) == {"known"}
    assert "place_in_pass" in calls(_function(tree, "place_one"))
