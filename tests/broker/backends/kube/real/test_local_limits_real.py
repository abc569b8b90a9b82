"""Kueue's ClusterQueue quota read from a real kube-apiserver with Kueue v0.19: the nominal
quota per GPU flavor, and what an admitted job reserves of it."""
from __future__ import annotations

import pytest

from broker.backends.base import JobState
from broker.spec import WorkloadSpec

from . import cluster as c
from .conftest import IDENTITY

pytestmark = pytest.mark.k8s


def _a100(limits):
    return next(q for q in limits.quotas if q.pool == "a100" and q.source.startswith("ClusterQueue gpu-cq "))


def test_real_clusterqueue_reports_its_gpu_quota_and_reserved_use(kueue_backend):
    # The fixture waited for the previous tests' Workloads to go; Kueue writes the
    # ClusterQueue's status a moment later, so wait until it shows nothing reserved.
    before = c.wait_for(lambda: (q := _a100(kueue_backend.inventory().limits)).used_gpus == 0 and q,
                        60, what="the ClusterQueue to release the previous tests' reservations")
    assert before.source == "ClusterQueue gpu-cq flavor a100" and before.scope == ""
    assert before.limit_gpus == 8 and before.borrow_gpus == 0
    spec = WorkloadSpec(project="proj", name="limits", command="sleep 60", gpus_per_worker=2, workers=1,
                        gpu_models=("A100-80GB",), cpus_per_worker=1, memory_gb_per_worker=1,
                        time_limit_minutes=10)
    job_id = kueue_backend.submit(spec, "wl-limits-real", IDENTITY)
    c.wait_for(lambda: (j := kueue_backend.status([job_id]).get(job_id)) and j.state == JobState.RUNNING,
               90, what="the job admitted and running")
    after = c.wait_for(lambda: (q := _a100(kueue_backend.inventory().limits)).used_gpus == 2 and q,
                       60, what="the ClusterQueue's reservation to show the job")
    assert after.headroom_gpus == 8 - after.used_gpus
