"""The broker as MultiKueue's external dispatcher, on a real manager and two real workers.

Jobs are created with the Kubernetes client on the manager (never through the portal);
the manager's Kueue waits for our nominations (dispatcherName gpubroker.io/dispatcher).
Each test drives the dispatcher's pass the way the beat schedule does, one call a second.
"""
from __future__ import annotations

import time
from datetime import date

import pytest
from kubernetes import client

from accounting.chargeback import build_report
from accounting.models import UsageEntry
from broker.faults.multikueue import arm, multikueue_hooks
from broker.faults.points import Crash, FaultPlan
from broker.models import AuditRecord, Reservation, Workload
from broker.services.dispatching.multikueue import multikueue_dispatch
from broker.services.quota.reservations import gpus_in_use
from tests.broker.backends.kube.real import cluster as c
from tests.factories import MembershipFactory, UserFactory

from . import support as s
from .conftest import ADMISSION_TIMEOUT_S

pytestmark = pytest.mark.k8s
MK_NAME = {"mk-a": "worker-main", "mk-b": "worker-worker2"}
DATA = {"gpubroker.io/data-location": "lattice-ds", "gpubroker.io/data-size-gb": "2000"}


class Watch:
    """Runs dispatcher passes and checks, at every look, that no Workload on the manager
    carries more nominations than the policy lists (one worker, unless ``most`` says)."""

    def __init__(self, fleet, most: int = 1):
        self.fleet, self.manager, self.most = fleet, fleet["apis"]["manager"], most
        self.seen: dict[str, set[str]] = {}  # job -> every worker it was nominated to

    def look(self) -> dict[str, dict]:
        out = {}
        for wl in s.workloads(self.manager):
            job = wl["metadata"]["ownerReferences"][0]["name"]
            nominated = (wl.get("status") or {}).get("nominatedClusterNames") or []
            assert len(nominated) <= self.most, f"{job}: more nominations in force than the policy lists: {nominated}"
            self.seen.setdefault(job, set()).update(nominated)
            out[job] = wl
        return out

    def run(self, until, timeout_s: float = 120, what: str = ""):
        deadline = time.monotonic() + timeout_s
        while True:
            multikueue_dispatch(cluster_id=self.fleet["manager"].id)
            state = self.look()
            if until(state):
                return state
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {state.keys()}"
            time.sleep(1)


def cluster_of(wl: dict) -> str:
    st = wl.get("status") or {}
    return st.get("clusterName") or ",".join(st.get("nominatedClusterNames") or [])


def record(wl: dict) -> Workload:
    return Workload.objects.get(uid=wl["metadata"]["uid"])


def decided(rec: Workload, action: str = "multikueue.nominated") -> AuditRecord:
    return AuditRecord.objects.filter(workload=rec, action=action).latest("id")


def finished(state: dict, jobs) -> bool:
    return all(Workload.objects.filter(uid=state[j]["metadata"]["uid"], state="completed").exists()
               for j in jobs if j in state) and all(j in state for j in jobs)


def test_jobs_created_on_the_manager_are_nominated_as_ranked_run_there_and_are_charged(fleet):
    manager = fleet["apis"]["manager"]
    s.create_job(manager, s.job("plain-1", pods=2, gpus=2, seconds=15))
    s.create_job(manager, s.job("data-1", pods=1, gpus=4, seconds=15, annotations=DATA))
    s.create_job(manager, s.job("plain-2", pods=1, gpus=1, seconds=15))
    watch = Watch(fleet)
    state = watch.run(lambda st: len(st) == 3 and all(cluster_of(w) for w in st.values()), 90, "3 nominations")
    expected = {"plain-1": "worker-worker2", "data-1": "worker-main", "plain-2": "worker-worker2"}
    for job, wl in state.items():
        rec = record(wl)
        decision = decided(rec)
        ranked_first = decision.inputs["candidates"][0]
        # the nomination is our ranking's first choice, and the one this fleet implies:
        # the cheaper worker, unless the job's 2 TB dataset lives on the dearer one
        assert cluster_of(wl) == MK_NAME[ranked_first] == expected[job], (job, decision.inputs)
        assert rec.origin == "multikueue" and rec.external_ref == f"{s.NS}/{wl['metadata']['name']}"
        assert rec.policy_version == decision.policy_version != ""
    assert gpus_in_use(tenant_id=fleet["tenant"].id, gpu_class_id=fleet["gpu_class"].id) == 4 + 4 + 1

    state = watch.run(lambda st: all((w.get("status") or {}).get("clusterName") for w in st.values()),
                      90, "admission on the nominated workers")
    for job in state:
        worker = fleet["apis"][expected[job]]
        pods = c.wait_for(lambda worker=worker, job=job: client.CoreV1Api(worker).list_namespaced_pod(
            s.NS, label_selector=f"batch.kubernetes.io/job-name={job}").items, 30,
            what=f"{job} pods on {expected[job]}")
        prefix = expected[job].removeprefix("worker-")
        assert all((p.spec.node_name or prefix).startswith(prefix) for p in pods)

    watch.run(lambda st: finished(st, expected), 120, "all completed")
    assert gpus_in_use(tenant_id=fleet["tenant"].id, gpu_class_id=fleet["gpu_class"].id) == 0
    for job, worker_name in expected.items():
        rec = Workload.objects.get(name=s.workload_of_job(manager, job)["metadata"]["name"][:63])
        assert rec.worker_cluster == worker_name and rec.run_seconds and rec.run_seconds > 0
        assert not Reservation.objects.filter(workload=rec, state__in=("active", "confirmed")).exists()
        assert UsageEntry.objects.filter(workload=rec, cluster__name=rec.cluster.name).exists()
    _shown_in_portal_and_chargeback(fleet, rec)


def _shown_in_portal_and_chargeback(fleet, rec: Workload) -> None:
    from django.test import Client

    member, outsider = Client(), Client()
    member.force_login(fleet["user"])
    # an outsider: a researcher of another tenant (one with no role anywhere gets 403)
    outsider.force_login(MembershipFactory(user=UserFactory(username="mk-outsider")).user)
    page = member.get(f"/workloads/{rec.id}/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'data-origin="multikueue"' in body and rec.external_ref in body and rec.uid in body
    assert "mk-a" in body and "mk-b" in body  # the ranking, as for any placement
    assert rec.uid in member.get("/workloads/").content.decode()
    assert outsider.get(f"/workloads/{rec.id}/").status_code == 404
    report = build_report(months=[date.today().replace(day=1)], tenant_ids={fleet["tenant"].id})
    rows = [r for r in report.rows if r.project == "lattice"]
    assert rows and sum(r.onprem_seconds for r in rows) > 0


def test_a_stale_worker_is_never_nominated(fleet):
    # the broker can no longer read worker2 (the cheaper one): its inventory goes stale
    fleet["b"].config = {**fleet["b"].config, "kubeconfig": "/nonexistent/worker2.kubeconfig"}
    fleet["b"].save()
    manager = fleet["apis"]["manager"]
    for i in range(2):
        s.create_job(manager, s.job(f"stale-{i}", pods=1, gpus=2, seconds=5))
    watch = Watch(fleet)
    state = watch.run(lambda st: len(st) == 2 and all(cluster_of(w) for w in st.values()), 90, "nominations")
    for wl in state.values():
        assert cluster_of(wl) == "worker-main"
        assert decided(record(wl)).inputs["excluded"]["mk-b"]["rule"] == "stale"
    watch.run(lambda st: all((w.get("status") or {}).get("clusterName") for w in st.values()), 60, "admitted")
    assert all(seen == {"worker-main"} for seen in watch.seen.values()), watch.seen


def test_a_worker_that_does_not_admit_in_time_loses_the_nomination_to_the_next_choice(fleet):
    worker2 = fleet["apis"]["worker-worker2"]
    c.apply(worker2, *s.worker_objects(stopped=True))  # worker2 admits nothing
    try:
        s.create_job(fleet["apis"]["manager"], s.job("slow-1", pods=1, gpus=2, seconds=5))
        watch = Watch(fleet)
        state = watch.run(lambda st: st and cluster_of(st["slow-1"]), 60, "first nomination")
        assert cluster_of(state["slow-1"]) == "worker-worker2"  # the cheaper one first
        first_at = time.monotonic()
        state = watch.run(lambda st: (st["slow-1"].get("status") or {}).get("clusterName"),
                          ADMISSION_TIMEOUT_S + 60, "admission after the renomination")
        assert time.monotonic() - first_at >= ADMISSION_TIMEOUT_S - 2
        assert state["slow-1"]["status"]["clusterName"] == "worker-main"
        rec = record(state["slow-1"])
        moved = decided(rec, "multikueue.renominated")
        assert moved.inputs["previous"] == ["worker-worker2"] and moved.inputs["workers"] == ["worker-main"]
        assert Reservation.objects.filter(workload=rec, state__in=("active", "confirmed")).count() == 1
    finally:
        c.apply(worker2, *s.worker_objects(stopped=False))


@pytest.mark.parametrize("point", ["multikueue_before_nominate", "multikueue_after_nominate"])
def test_a_broker_restart_during_nomination_leaves_one_nomination_and_loses_none(fleet, point):
    manager = fleet["apis"]["manager"]
    jobs = [f"crash-{i}" for i in range(3)]
    for name in jobs:
        s.create_job(manager, s.job(name, pods=1, gpus=1, seconds=5))
    watch = Watch(fleet)
    # (no pass yet: the broker is down while the Workloads arrive)
    c.wait_for(lambda: len(st := watch.look()) == 3 and all(
        (w.get("status") or {}).get("admissionChecks") for w in st.values()), 60, what="Workloads waiting")
    assert not any(watch.seen.values())
    plan = FaultPlan()
    arm(plan, point, skip=1)  # the second nomination of the pass dies
    with multikueue_hooks(plan), pytest.raises(Crash):
        for _ in range(30):
            multikueue_dispatch(cluster_id=fleet["manager"].id)
            watch.look()
            time.sleep(1)
    state = watch.look()
    on_manager = {j for j, w in state.items() if (w.get("status") or {}).get("nominatedClusterNames")}
    recorded = {j for j, w in state.items() if Workload.objects.filter(
        uid=w["metadata"]["uid"], nominated_at__isnull=False).exists()}
    # the crash left the manager and the broker's records disagreeing about one Workload
    assert (on_manager - recorded) if point == "multikueue_after_nominate" else (on_manager == recorded)
    # the restarted broker: every Workload admitted once, on the worker it was nominated to
    state = watch.run(lambda st: all((w.get("status") or {}).get("clusterName") for w in st.values()),
                      90, "every Workload admitted after the restart")
    for job, wl in state.items():
        assert Workload.objects.filter(uid=wl["metadata"]["uid"]).count() == 1
        rec = record(wl)
        assert Reservation.objects.filter(workload=rec).count() == 1
        assert watch.seen[job] == {wl["status"]["clusterName"]}, watch.seen
    if point == "multikueue_after_nominate":
        assert AuditRecord.objects.filter(action="multikueue.nomination_adopted").count() == 1


def test_a_policy_short_list_nominates_the_ranked_workers_in_order(fleet):
    from broker.services.fleet.policy import policy_override

    from .conftest import policy_text

    with policy_override(policy_text(nominate=2), "mk-dispatcher short list"):
        s.create_job(fleet["apis"]["manager"], s.job("list-1", pods=1, gpus=1, seconds=5))
        state = Watch(fleet, most=2).run(lambda st: st and cluster_of(st["list-1"]), 60, "the short list")
    status = state["list-1"]["status"]
    decision = decided(record(state["list-1"]))
    ranked = [MK_NAME[name] for name in decision.inputs["candidates"]]
    assert decision.inputs["workers"] == ranked[:2] == ["worker-worker2", "worker-main"]
    assert status.get("clusterName") in ranked or status.get("nominatedClusterNames") == ranked[:2]


def test_a_workload_deleted_on_the_manager_ends_here_and_frees_its_quota(fleet):
    manager = fleet["apis"]["manager"]
    s.create_job(manager, s.job("gone-1", pods=1, gpus=2, seconds=300))
    watch = Watch(fleet)
    state = watch.run(lambda st: st and cluster_of(st["gone-1"]), 60, "nomination")
    rec = record(state["gone-1"])
    assert gpus_in_use(tenant_id=fleet["tenant"].id, gpu_class_id=fleet["gpu_class"].id) == 2
    s.delete_all(manager)
    multikueue_dispatch(cluster_id=fleet["manager"].id)
    rec.refresh_from_db()
    assert rec.state == "cancelled" and rec.ended_at is not None
    assert gpus_in_use(tenant_id=fleet["tenant"].id, gpu_class_id=fleet["gpu_class"].id) == 0
    assert AuditRecord.objects.filter(workload=rec, action="reservation.released").exists()
