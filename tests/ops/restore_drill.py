"""The broker started on a restored database, in a process of its own (tests/ops/test_restore_drill.py).

    DATABASE_URL=postgres://.../restored CELERY_BROKER_URL= \\
        python -m tests.ops.restore_drill CLUSTERS_IN.json RESULT_OUT.json

The simulated clusters play the real ones, which outlive the broker's database: the test hands
their state over as JSON (broker/backends/sim/snapshot.py), this process takes it up on the same
manual clock, runs what an operator runs after a restore (``migrate``, ``after_restore``) and
then the beat's passes through the tasks' own entry points (tasks run in-process: no Celery
broker), and writes back what the clusters hold and what the restored database says.
"""
from __future__ import annotations

import base64
import json
import os
import sys
from datetime import date, datetime, timezone

ORIGIN = datetime(2026, 11, 27, 9, 0, tzinfo=timezone.utc)
CLUSTERS = {"drill-a": "1.0", "drill-b": "1.5"}  # name -> list price per GPU-hour
CLOSED_MONTH = date(2026, 11, 1)
FINANCE = "money"  # the finance user of tests/conftest.py's trio


def build_fleet():
    """Both processes' simulated fleet: the same layout on a manual clock from ORIGIN."""
    from broker.backends.sim import NodeGroup, SimClock, SimulatorFleet

    fleet = SimulatorFleet.reset(clock=SimClock(origin=ORIGIN))
    for name in CLUSTERS:
        fleet.add_cluster(name, "slurm", node_groups=[NodeGroup(
            count=2, gpu_model="A100", gpu_memory_gb=80, gpus_per_node=8, name_prefix=f"{name}-")])
    return fleet


def fleet_state(fleet) -> dict:
    return {name: fleet.get(name).to_json() for name in fleet.names()}


def load_fleet(state: dict):
    fleet = build_fleet()
    for name, saved in state.items():
        fleet.get(name).load_json(saved)
    return fleet


def closed_month_csv() -> bytes:
    """The closed month's chargeback export, through the export view's selector and renderer."""
    from django.contrib.auth.models import User

    from accounting import selectors
    from accounting.exports import chargeback_csv

    report = selectors.chargeback_report(user=User.objects.get(username=FINANCE), first=CLOSED_MONTH, months=1)
    return chargeback_csv(report)


def _start_broker(fleet) -> dict:
    """What the runbook says, then two rounds of the beat's passes, the lease apart."""
    import io

    from django.core.management import call_command

    from accounting.tasks import collect_all_usage
    from broker import tasks
    from broker.services.dispatching.send import attempt_lease_s

    out = io.StringIO()
    call_command("migrate", "--no-input", verbosity=0)
    call_command("after_restore", stdout=out)
    for _ in range(2):
        tasks.sync_all_inventory()
        tasks.poll_all_status()
        tasks.reconcile()
        tasks.place_waiting()
        fleet.advance(attempt_lease_s() + 5)  # past the lease: the follow-ups' look-ups may run
    tasks.sync_all_inventory()
    tasks.poll_all_status()
    collect_all_usage()
    return {"after_restore": out.getvalue()}


def _database() -> dict:
    from accounting.models import UsageEntry
    from broker.models import Escalation, ReconcileRun, Workload

    workloads = {w.uid: {"state": w.state, "job": w.destination_job_id, "cluster": w.cluster.name if w.cluster else "",
                         "attempts": list(w.attempts.order_by("number").values_list("state", flat=True))}
                 for w in Workload.objects.select_related("cluster")}
    escalations = [{"kind": e.kind, "state": e.state, "job": e.destination_job_id,
                    "workload_id": e.evidence.get("workload_id")} for e in Escalation.objects.all()]
    usage = list(UsageEntry.objects.values("cluster__name", "job_id", "workload__uid", "gpu_seconds", "project__slug"))
    errors = [e for run in ReconcileRun.objects.all() for e in run.report.get("errors", [])]
    return {"workloads": workloads, "escalations": escalations, "usage": usage, "reconcile_errors": errors,
            "closed_month_csv": base64.b64encode(closed_month_csv()).decode()}


def main(clusters_in: str, result_out: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from broker import runtime

    with open(clusters_in) as f:
        fleet = load_fleet(json.load(f))
    with runtime.override(now=fleet.clock.now):  # the broker's clock is the clusters' clock
        result = _start_broker(fleet)
        result.update(_database())
    result["clusters"] = fleet_state(fleet)
    with open(result_out, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main(*sys.argv[1:3])
