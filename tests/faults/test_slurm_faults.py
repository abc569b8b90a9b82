"""Faults against the real single-host Slurm cluster (scripts/slurm-cluster up): the crash
points around sbatch/squeue/scancel, and slurmctld really stopped and started.

Run with SLURM_TESTS=1 (as the Slurm backend's own integration tests); GPUBROKER_CI_REQUIRE
containing "slurm" turns a skip into a failure.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _slurm_cluster():
    if os.environ.get("SLURM_TESTS") != "1":
        pytest.skip("real Slurm cluster tests are off: run `scripts/slurm-cluster up` and set SLURM_TESTS=1")
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if "is UP" not in ping.stdout:
        pytest.fail(f"SLURM_TESTS=1 but slurmctld is not up: {ping.stdout}{ping.stderr}")


def test_harness_against_real_slurm_breaks_no_invariant():
    from broker.faults.harness import HarnessConfig, run_harness

    report = run_harness(HarnessConfig(
        workloads=8, faults=10, seed=3, slurm=True, cancel_share=0.4,
        points=("after_accept_before_reply", "reply_lost", "after_attempt_record", "during_cancel_before_send",
                "during_status", "slurmctld_stop_start", "orphan_job", "redis_restarted")))
    print(report.table())
    assert report.faults >= 10 and report.faults_by_point["slurmctld_stop_start"] >= 1, report.table()
    assert all(v == 0 for v in report.counts.values()), report.table()


def _wait(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_slurmctld_stopped_and_started_a_job_that_ends_meanwhile_is_only_charged_once_it_answers(trio, settings):
    import random

    from broker.faults.harness import SlurmEnvironment
    from broker.faults.install import captured_tasks, faulty_backends
    from broker.faults.points import FaultPlan
    from broker.models import AuditRecord, Cluster, Quota, Reservation
    from broker.services.dispatching.send import workload_dispatch
    from broker.services.fleet.registration import gpu_classes_from_policy
    from broker.services.fleet.inventory import cluster_sync_inventory
    from broker.services.placing.cycle import workload_place
    from broker.services.following.reconcile import reconcile_fleet
    from broker.services.following.status import cluster_poll_status
    from broker.services.submitting.workloads import workload_submit

    settings.GPUBROKER_ENABLE_SLURM = True
    env = SlurmEnvironment(random.Random(1))
    gpu_class = {c.slug: c for c in gpu_classes_from_policy()}["a100-80gb"]
    Quota.objects.create(tenant=trio.tenant, gpu_class=gpu_class, limit_gpus=8)
    trio.project.slurm_account = "general"
    trio.project.save()
    queue: list = []
    # the job leaves this file when it ends at slurmd: the event the outage must live through
    marker = Path(tempfile.gettempdir()) / f"gpubroker-outage-{secrets.token_hex(6)}"
    with faulty_backends(FaultPlan(), env.builders()), captured_tasks(queue):
        [cluster] = env.register()
        cluster_sync_inventory(cluster_id=cluster.id)
        workload = workload_submit(user=trio.member, project_id=trio.project.id, spec_data={
            "name": "through-an-outage", "command": f"sleep 8 && touch {marker}", "gpu_class": "a100-80gb", "gpus_per_worker": 1,
            "workers": 1, "time_limit_minutes": 2, "cpus_per_worker": 1, "memory_gb_per_worker": 1})
        workload_place(workload_id=workload.id)
        workload = workload_dispatch(workload_id=workload.id)
        workload.refresh_from_db()
        assert workload.state == "queued" and workload.destination_job_id
        assert _wait(lambda: (cluster_poll_status(cluster_id=cluster.id) or True)
                     and workload.__class__.objects.get(id=workload.id).state == "running", 30)

        env.controller(cluster.name, up=False)                    # slurmctld stops
        try:
            cluster_poll_status(cluster_id=cluster.id)
            assert Cluster.objects.get(id=cluster.id).health == "stale"
            assert _wait(marker.exists, 60)                        # the job ends at slurmd meanwhile
            cluster_poll_status(cluster_id=cluster.id)
            reconcile_fleet()
            workload.refresh_from_db()
            assert workload.state == "running" and workload.ended_at is None
            assert Reservation.objects.get(workload=workload).state == "confirmed"
        finally:
            env.controller(cluster.name, up=True)                 # and starts again
        cluster_sync_inventory(cluster_id=cluster.id)
        assert Cluster.objects.get(id=cluster.id).health == "healthy"
        assert _wait(lambda: (cluster_poll_status(cluster_id=cluster.id) or True)
                     and workload.__class__.objects.get(id=workload.id).state == "completed", 60)
        workload.refresh_from_db()
        assert Reservation.objects.get(workload=workload).state == "released"
        fresh = AuditRecord.objects.filter(action="cluster.fresh", cluster=cluster.name).latest("id")
        ended = AuditRecord.objects.get(workload=workload, action="workload.completed")
        assert ended.id > fresh.id                                 # charged only once it answered again
        jobs = [j for j in env.truth.all_jobs() if j.workload_id == workload.uid]
        assert [j.job_id for j in jobs] == [workload.destination_job_id]
