"""The pre-flight GPU check on the real Slurm cluster, through the broker's own services: a
workload's check fails on node n2 (its own ``gpu_check_command``; the test cluster's GPUs are
fake device files, so the default count check passes everywhere). The job ends there as "GPU
check failed on worker 0 (node n2)", read from its output; the workload is placed again, its
first job charged to nobody, n2 blocked behind an escalation, and its next job, sent with
``--exclude=n2``, runs on n1."""
from __future__ import annotations

import subprocess

import pytest

from accounting.models import UsageEntry
from accounting.services.usage import usage_collect
from broker.models import Cluster, Escalation, Workload
from broker.selectors.node_blocks import blocked_nodes
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.identity import slurm_accounts_ensure
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.following.cancel import cancel_propagate
from broker.services.following.status import cluster_poll_status
from broker.services.placing.cycle import workload_place
from broker.services.submitting.workloads import workload_cancel, workload_submit

from .support import JOBDIR
from .test_broker_path import _wait, real_slurm, researcher_project  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slurm


def _sh(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=True).stdout


def _state(workload: Workload) -> str:
    return Workload.objects.get(id=workload.id).state


def test_a_check_that_fails_on_n2_places_the_job_again_on_n1_uncharged_with_n2_blocked(
        real_slurm, researcher_project):  # noqa: F811
    project, user = researcher_project
    (JOBDIR / "out").mkdir(parents=True, exist_ok=True)
    # the jobs' output where the backend reads it: the check names its worker and node there
    Cluster.objects.filter(id=real_slurm.id).update(config={**real_slurm.config, "output_dir": str(JOBDIR / "out")})
    slurm_accounts_ensure(create=True)
    blocker = _sh("sbatch", "--parsable", "-p", "gpu", "-w", "n1", "-N1", "--gres=gpu:8", "-t", "5",
                  "-A", "general", "-D", "/tmp", "-o", "/dev/null", "--wrap", "sleep 300").strip()
    workload = None
    try:
        assert _wait(lambda: "RUNNING" in _sh("squeue", "-h", "-j", blocker, "-o", "%T"), 40)
        cluster_sync_inventory(cluster_id=real_slurm.id)
        workload = workload_submit(user=user, project_id=project.id, spec_data={
            "name": "checked", "command": "sleep 20", "gpu_class": "a100-80gb", "gpus_per_worker": 8,
            "cpus_per_worker": 1, "memory_gb_per_worker": 1, "time_limit_minutes": 5, "gpu_check": True,
            "gpu_check_command": '[ "$SLURMD_NODENAME" != n2 ]'})
        workload = workload_dispatch(workload_id=workload_place(workload_id=workload.id).id)
        first_job = Workload.objects.get(id=workload.id).destination_job_id
        assert first_job

        def placed_again() -> bool:
            cluster_poll_status(cluster_id=real_slurm.id)
            return _state(workload) == "waiting"

        assert _wait(placed_again, 60), Workload.objects.filter(id=workload.id).values_list("state", "raw_reason")[0]
        held = Workload.objects.get(id=workload.id)
        assert held.raw_reason.startswith("GPU check failed on worker 0 (node n2) at ci-slurm: placed again, not on n2")
        [escalation] = Escalation.objects.filter(kind="gpu_check", cluster=real_slurm)
        assert escalation.evidence["node"] == "n2" and escalation.destination_job_id == first_job
        assert set(blocked_nodes()[real_slurm.id]) == {"n2"}

        subprocess.run(["scancel", blocker], timeout=30, check=True)
        assert _wait(lambda: not _sh("squeue", "-h", "-j", blocker, "-o", "%T").strip(), 40)
        cluster_sync_inventory(cluster_id=real_slurm.id)
        workload = workload_dispatch(workload_id=workload_place(workload_id=workload.id).id)
        second_job = Workload.objects.get(id=workload.id).destination_job_id
        assert second_job and second_job != first_job
        assert "ExcNodeList=n2" in _sh("scontrol", "show", "job", second_job)

        def running() -> bool:
            cluster_poll_status(cluster_id=real_slurm.id)
            return _state(workload) in ("running", "completed")

        assert _wait(running, 60), Workload.objects.filter(id=workload.id).values_list("state", "raw_reason")[0]
        assert _sh("squeue", "-h", "-j", second_job, "-o", "%N").strip() in ("n1", "")

        assert _wait(lambda: usage_collect(cluster_id=real_slurm.id) and UsageEntry.objects.filter(
            cluster=real_slurm, job_id=first_job).exists(), 40)
        assert UsageEntry.objects.get(cluster=real_slurm, job_id=first_job).waived
    finally:
        subprocess.run(["scancel", blocker], capture_output=True, timeout=30)
        if workload is not None and _state(workload) not in ("completed", "failed", "cancelled", "waiting"):
            workload_cancel(user=user, workload_id=workload.id)
            _wait(lambda: cancel_propagate(workload_id=workload.id).state == "cancelled", 30)
