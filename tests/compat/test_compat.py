"""The compatibility suite (issue 28): the same broker-path tests, unchanged, on each control
plane and version CI runs (tests/compat/planes.py; the `slurm` lane runs them on 22.05, 24.11.5
and 26.05.5). Each goes through the broker's own services, as the beat and the workers do:
submit, place, dispatch, follow, cancel, collect usage. What each shows: admission of a whole
gang, the GPUs it holds on each node, its accounting record, a job above the cluster's local
quota never sent, cancellation reaching the cluster, and a higher-priority local job
preempting the broker's job, which the broker reports in plain words."""

from __future__ import annotations

import pytest

from accounting.models import UsageEntry
from accounting.services.usage import usage_collect
from broker.models import Quota, Workload
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.identity import slurm_accounts_ensure
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.registration import gpu_classes_from_policy
from broker.services.following.cancel import cancel_propagate
from broker.services.following.status import cluster_poll_status
from broker.services.placing.cycle import workload_place
from broker.services.submitting.workloads import workload_cancel, workload_submit
from tests.factories import MembershipFactory, ProjectFactory, TenantFactory, UserFactory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker(plane, settings):
    """The plane's cluster registered and synced, and a researcher whose project the tests
    point at the limited account or a fresh one."""
    cluster = plane.register(settings)
    tenant = TenantFactory(slug="physics")
    user = UserFactory(username="compat")
    MembershipFactory(user=user, tenant=tenant, role="researcher")
    classes = {c.slug: c for c in gpu_classes_from_policy()}
    Quota.objects.create(tenant=tenant, gpu_class=classes["a100-80gb"], limit_gpus=64)

    def project(*, limited: bool = False):
        made = ProjectFactory(tenant=tenant, slug="limited" if limited else "lattice",
                              **plane.project_fields(limited=limited))
        slurm_accounts_ensure(create=True)
        cluster_sync_inventory(cluster_id=cluster.id)
        return made

    return cluster, user, project


def _submit(user, project, *, name: str, workers: int, gpus: int, command: str) -> Workload:
    workload = workload_submit(user=user, project_id=project.id, spec_data={
        "name": name, "command": command, "gpu_class": "a100-80gb", "gpus_per_worker": gpus, "workers": workers,
        "cpus_per_worker": 1, "memory_gb_per_worker": 1, "time_limit_minutes": 10})
    return workload_place(workload_id=workload.id)


def _sent(user, project, **spec) -> Workload:
    workload = _submit(user, project, **spec)
    assert workload.state == "reserved", workload.raw_reason
    workload_dispatch(workload_id=workload.id)
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.destination_job_id, workload.raw_reason
    return workload


def _followed_until(cluster, workload: Workload, states: set[str], timeout_s: float = 90) -> Workload:
    def reached():
        cluster_poll_status(cluster_id=cluster.id)
        now = Workload.objects.get(id=workload.id)
        return now if now.state in states else None

    return wait_for(reached, timeout_s, every=1, what=f"workload {workload.uid} {sorted(states)}")


def test_a_gang_is_admitted_whole_holds_its_gpus_on_its_nodes_and_is_accounted(plane, broker):
    cluster, user, project = broker
    workload = _sent(user, project(), name="gang", workers=2, gpus=2, command="sleep 8")
    running = _followed_until(cluster, workload, {"running", "completed"})
    assert running.started_at is not None
    held = plane.gpus_on_nodes(workload.destination_job_id)
    # both workers at once, each on a node of its own with the GPUs it asked for
    assert sorted(held.values()) == [2, 2] and len(held) == 2, held
    done = _followed_until(cluster, workload, {"completed"})
    assert done.reservations.get().state == "released"

    def charged():
        usage_collect(cluster_id=cluster.id)
        return UsageEntry.objects.filter(cluster=cluster, job_id=workload.destination_job_id).first()

    entry = wait_for(charged, 120, every=1, what="the job's accounting record")
    assert entry.workload_id == workload.id and entry.gpus == 4
    assert 4 * 6 <= entry.gpu_seconds <= 4 * 60, entry.gpu_seconds  # four GPUs for the job's ~8 s


def test_a_job_above_the_clusters_local_quota_is_not_sent_and_the_broker_says_which_limit(plane, broker):
    _cluster, user, project = broker
    workload = _submit(user, project(limited=True), name="too-big", workers=2, gpus=plane.limited_gpus,
                       command="sleep 1")
    assert workload.state in ("waiting", "rejected") and not workload.destination_job_id
    assert all(words in workload.raw_reason for words in plane.limit_words), workload.raw_reason


def test_a_cancel_ends_the_job_at_the_cluster_and_releases_its_reservation(plane, broker):
    cluster, user, project = broker
    workload = _sent(user, project(), name="cancel-me", workers=1, gpus=1, command="sleep 300")
    _followed_until(cluster, workload, {"running"})
    workload_cancel(user=user, workload_id=workload.id)

    def cancelled():
        cancel_propagate(workload_id=workload.id)
        now = Workload.objects.get(id=workload.id)
        return now if now.state == "cancelled" else None

    done = wait_for(cancelled, 60, every=1, what="the cancel to be confirmed")
    assert plane.is_gone(workload.destination_job_id)
    assert done.reservations.get().state == "released"


def test_a_higher_priority_local_job_preempts_the_brokers_job_and_the_broker_says_so(plane, broker):
    cluster, user, project = broker
    whole = plane.gpus_per_node
    workload = _sent(user, project(), name="preempted", workers=plane.nodes, gpus=whole, command="sleep 300")
    _followed_until(cluster, workload, {"running"})
    urgent = plane.start_urgent_local_job(whole)
    try:
        ended = _followed_until(cluster, workload, {plane.preempted_state}, 120)
        said = f"{ended.raw_reason} {ended.outcome}".lower()
        assert plane.preempted_words in said, (ended.state, ended.raw_reason, ended.outcome)
        wait_for(lambda: plane.local_job_state(urgent) == "RUNNING", 60, every=1,
                 what="the local job to run on the GPUs it took")
        assert plane.is_gone(workload.destination_job_id)
        assert ended.reservations.get().state == "released"
    finally:
        plane.end_local_job(urgent)
