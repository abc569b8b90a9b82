"""The compatibility suite (issue 28): the same broker-path tests, unchanged, on each control
plane and version CI runs (tests/compat/planes.py; the `slurm` lane runs them on 22.05, 24.11.5
and 26.05.5, the `k8s` lane on Kueue with kueue.x-k8s.io/v1beta1 served and unserved, and on
Volcano). Each goes through the broker's own services, as the beat and the workers do: submit,
place, dispatch, follow, cancel, collect usage. What each shows: admission of a whole gang, the
GPUs each worker holds, its accounting record, a job above the cluster's local quota never
sent, cancellation reaching the cluster, and a higher-priority local job preempting the
broker's job, which the broker reports in the cluster's words, queues or places again (not a
failure) and charges once per run. And, on Kueue, where the policy makes the broker the owner
of preemption: the broker cancels its own lower-priority job there for a waiting one."""

from __future__ import annotations

import pytest

from accounting.models import UsageEntry
from accounting.services.usage import usage_collect
from broker import runtime
from broker.models import Quota, Workload
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.identity import slurm_accounts_ensure
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.registration import gpu_classes_from_policy
from broker.services.following.cancel import cancel_propagate
from broker.services.following.status import cluster_poll_status
from broker.services.placing.cycle import workload_place
from broker.services.submitting.workloads import workload_cancel, workload_submit
from broker.services.fleet.policy import current_policy, policy_override
from broker.services.placing.preempting import broker_preemption_pass
from tests.compat.planes import PLANES, PREEMPTION_PLANES
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
    Quota.objects.create(tenant=tenant, gpu_class=classes[plane.gpu_class], limit_gpus=64)

    def project(*, limited: bool = False):
        made = ProjectFactory(tenant=tenant, slug="limited" if limited else "lattice",
                              **plane.project_fields(limited=limited))
        slurm_accounts_ensure(create=True)
        cluster_sync_inventory(cluster_id=cluster.id)
        return made

    return cluster, user, project


def _submit(plane, user, project, *, name: str, workers: int, gpus: int, command: str, **extra) -> Workload:
    workload = workload_submit(user=user, project_id=project.id, spec_data={
        "name": name, "command": command, "gpu_class": plane.gpu_class, "gpus_per_worker": gpus, "workers": workers,
        "cpus_per_worker": 1, "memory_gb_per_worker": 1, "time_limit_minutes": 10, **extra})
    return workload_place(workload_id=workload.id)


def _sent(plane, user, project, **spec) -> Workload:
    workload = _submit(plane, user, project, **spec)
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
    workload = _sent(plane, user, project(), name="gang", workers=2, gpus=2, command="sleep 8")
    running = _followed_until(cluster, workload, {"running", "completed"})
    assert running.started_at is not None
    # both workers at once, each with the GPUs it asked for
    held = plane.gpus_per_worker(workload.destination_job_id)
    assert held == [2, 2], held
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
    workload = _submit(plane, user, project(limited=True), name="too-big", workers=2, gpus=plane.limited_gpus,
                       command="sleep 1")
    assert workload.state in ("waiting", "rejected") and not workload.destination_job_id
    assert all(words in workload.raw_reason for words in plane.limit_words), workload.raw_reason


def _cancelled(user, workload: Workload) -> Workload:
    """Cancelled by its user, as the cancel task propagates it, until the cluster confirms."""
    workload_cancel(user=user, workload_id=workload.id)

    def cancelled():
        cancel_propagate(workload_id=workload.id)
        now = Workload.objects.get(id=workload.id)
        return now if now.state == "cancelled" else None

    return wait_for(cancelled, 60, every=1, what="the cancel to be confirmed")


def test_a_cancel_ends_the_job_at_the_cluster_and_releases_its_reservation(plane, broker):
    cluster, user, project = broker
    workload = _sent(plane, user, project(), name="cancel-me", workers=1, gpus=1, command="sleep 300")
    _followed_until(cluster, workload, {"running"})
    done = _cancelled(user, workload)
    assert plane.is_gone(workload.destination_job_id)
    assert done.reservations.get().state == "released"


@pytest.mark.parametrize("plane", PREEMPTION_PLANES, indirect=True)
def test_a_higher_priority_local_job_preempts_the_brokers_job_which_is_queued_again_and_charged_once(
        plane, broker):
    cluster, user, project = broker
    whole = plane.gpus_per_node
    # long enough to be preempted first (a local job takes its GPUs within seconds), short
    # enough that its second run ends within the test
    workload = _sent(plane, user, project(), name="preempted", workers=plane.nodes, gpus=whole, command="sleep 15")
    first_job = workload.destination_job_id
    running = _followed_until(cluster, workload, {"running"})
    # a few whole seconds of a first run to charge (Slurm's accounting counts whole seconds:
    # a job preempted within its first second was charged 0, CI at 388072e)
    wait_for(lambda: (runtime.now() - running.started_at).total_seconds() >= 3, 30, every=0.5,
             what="the first run's third second")
    wait_for(lambda: plane.start_recorded(first_job), 30, every=0.5, what="the first run's start in the accounting")
    urgent = plane.start_urgent_local_job(whole)
    try:
        # not a failure: queued again there (the plane requeues it) or placed again (it ended it)
        again = _followed_until(cluster, workload, {plane.preempted_state}, 120)
        assert again.preemptions == 1, (again.state, again.raw_reason)
        said = again.audit.get(action="workload.preempted").message  # in the destination's words
        assert plane.preempted_words in said, said
        wait_for(lambda: plane.local_job_state(urgent) == "RUNNING", 60, every=1,
                 what="the local job to run on the GPUs it took")
        if plane.requeues:
            assert again.destination_job_id == first_job
        else:
            assert plane.is_gone(first_job) and again.reservations.get().state == "released"
    finally:
        plane.end_local_job(urgent)
    # the GPUs back: it runs again (as the next placement pass and dispatch would send it)
    if not plane.requeues:
        wait_for(lambda: plane.is_gone(urgent), 60, every=1, what="the local job to end")
        cluster_sync_inventory(cluster_id=cluster.id)
        assert workload_place(workload_id=workload.id).state == "reserved"
        workload_dispatch(workload_id=workload.id)
    done = _followed_until(cluster, workload, {"completed"}, 180)
    assert done.preemptions == 1 and done.started_at is not None
    jobs = {first_job, done.destination_job_id}

    def charged():  # each run once: one record per job at the cluster, none twice
        usage_collect(cluster_id=cluster.id)
        entries = UsageEntry.objects.filter(cluster=cluster, workload=workload)
        return entries if {e.job_id for e in entries} == jobs and all(e.end for e in entries) else None

    entries = wait_for(charged, 120, every=2, what="both runs' accounting records")
    assert len(entries) == len(jobs) and all(e.gpu_seconds > 0 for e in entries), list(entries)
    # the second run's 15 s and at least a second of the first, on every GPU
    assert sum(e.gpu_seconds for e in entries) >= plane.nodes * whole * 16, [e.gpu_seconds for e in entries]


@pytest.mark.parametrize("plane", [PLANES["kueue"]], indirect=True)
def test_where_the_broker_owns_preemption_it_cancels_its_own_lower_priority_job_for_a_waiting_one(plane, broker):
    """On Kueue's compat-limited ClusterQueue (4 GPUs, no preemption of its own: the broker is
    the one owner): a low-priority job of the broker's fills it, a high-priority one waits at
    the broker; the broker cancels the low one there (confirmed) and the high one runs."""
    cluster, user, project = broker
    limited = project(limited=True)
    text = current_policy().text + (f"\npreemption:\n  owners: {{{cluster.name}: broker}}\n  after_s: 0\n"
                                    "  preemptible: [low]\n")
    with policy_override(text):
        low = _sent(plane, user, limited, name="scavenger", workers=1, gpus=4, command="sleep 300", priority="low")
        first_job = low.destination_job_id
        _followed_until(cluster, low, {"running"})
        cluster_sync_inventory(cluster_id=cluster.id)
        high = _submit(plane, user, limited, name="urgent", workers=1, gpus=4, command="sleep 5", priority="high")
        assert high.state == "waiting" and high.reason == "capacity", high.raw_reason
        try:
            # a foreground delete is confirmed once the Job reads 404: until then each pass asks again
            wait_for(lambda: broker_preemption_pass() == 1 or None, 60, every=2, what="the preemption")
            assert plane.is_gone(first_job)
            preempted = Workload.objects.get(id=low.id)
            assert preempted.preemptions == 1 and preempted.state in ("waiting", "reserved"), preempted.state
            note = preempted.audit.get(action="workload.preempted")
            assert note.inputs["for"] == high.uid and "priority high over low" in note.message

            def sent():  # the pass placed it if the freed quota showed already; else the next pass
                now = Workload.objects.get(id=high.id)
                if now.state == "waiting":
                    cluster_sync_inventory(cluster_id=cluster.id)
                    now = workload_place(workload_id=high.id)
                if now.state == "reserved":
                    workload_dispatch(workload_id=high.id)
                    now.refresh_from_db()
                return now if now.state in ("queued", "running", "completed") else None

            wait_for(sent, 60, every=2, what="the high-priority job to be sent")
            done = _followed_until(cluster, high, {"completed"}, 120)
            assert done.preemptions == 0 and done.cluster_id == cluster.id
        finally:
            for workload in Workload.objects.filter(id__in=(low.id, high.id)).exclude(
                    state__in=("completed", "cancelled", "failed", "rejected")):
                _cancelled(user, workload)
