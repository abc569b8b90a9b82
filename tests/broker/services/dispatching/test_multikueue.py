"""The MultiKueue pass over a manager view (the real loop runs against real clusters in
tests/broker/backends/kube/mk_dispatcher; these pin what a pass does with one view)."""
from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.backends.kube.dispatcher import ManagerView, ManagerWorkload, parse_workload
from broker.models import AuditRecord, Reservation, Workload, WorkloadState
from broker.services.dispatching.multikueue import multikueue_dispatch
from tests.factories import ClusterFactory, GpuClassFactory, ProjectFactory, QuotaFactory, TenantFactory

REAL = Path(__file__).parents[2] / "backends" / "kube" / "data" / "real"
NOW = datetime(2026, 12, 4, 6, 0, tzinfo=UTC)


class OneView:
    """A manager that shows the same Workloads on every read and takes no writes."""

    def __init__(self, *workloads: ManagerWorkload) -> None:
        self.workloads = workloads

    def view(self) -> ManagerView:
        return ManagerView(
            taken_at=NOW,
            workloads=self.workloads,
            active_workers=frozenset({"worker-main", "worker-worker2"}),
            inactive_workers={},
        )

    def nominate(self, wl: ManagerWorkload, workers: list[str]) -> bool:
        raise AssertionError(f"a pass nominated {wl.ref} to {workers}: it was admitted already")


@pytest.fixture
def manager():
    tenant = TenantFactory(slug="physics")
    ProjectFactory(tenant=tenant, slug="lattice")
    gpu_class = GpuClassFactory(slug="a100-80gb")
    QuotaFactory(tenant=tenant, gpu_class=gpu_class, limit_gpus=16)
    ClusterFactory(name="w-a", kind="kueue")
    ClusterFactory(name="w-b", kind="kueue")
    return ClusterFactory(name="mgr", kind="multikueue", config={"dispatcher": {
        "refresh_inventory": False,
        "workers": {"worker-main": "w-a", "worker-worker2": "w-b"},
        "queues": {"mkd/default": {"project": "lattice", "gpu_class": "a100-80gb"}},
        "model_names": {"NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB"}}})


def admitted_unrecorded() -> ManagerWorkload:
    """A Workload the broker nominated and then died before recording it; the worker
    admitted it before the broker's next pass (the nomination is gone from the status)."""
    obj = json.loads((REAL / "multikueue-dispatcher-workload-pending.json").read_text())
    wl = parse_workload(obj, {"mkd-check"})
    return replace(wl, nominated=(), cluster_name="worker-main", admitted_at=NOW, check_state="Ready")


@pytest.mark.django_db
def test_a_workload_admitted_before_the_broker_recorded_its_nomination_holds_its_quota(manager):
    wl = admitted_unrecorded()
    report = multikueue_dispatch(cluster_id=manager.id, now=NOW, client=OneView(wl))
    record = Workload.objects.get(uid=wl.uid)
    assert record.state == WorkloadState.RUNNING and record.cluster.name == "w-a"
    held = Reservation.objects.get(workload=record)
    assert (held.cluster.name, held.gpus, held.state) == ("w-a", record.total_gpus, "confirmed")
    assert report.admitted == 1 and report.adopted == [f"{wl.ref} -> worker-main (already admitted)"]
    assert AuditRecord.objects.filter(action="multikueue.nomination_adopted", workload=record).count() == 1


@pytest.mark.django_db
def test_a_second_pass_over_the_same_admitted_workload_adopts_nothing_more(manager):
    wl = admitted_unrecorded()
    multikueue_dispatch(cluster_id=manager.id, now=NOW, client=OneView(wl))
    report = multikueue_dispatch(cluster_id=manager.id, now=NOW, client=OneView(wl))
    assert report.adopted == [] and report.admitted == 0
    assert Reservation.objects.filter(workload__uid=wl.uid).count() == 1


@pytest.mark.django_db
def test_a_workload_that_ended_unseen_is_charged_its_quota_and_then_releases_it(manager):
    wl = replace(admitted_unrecorded(), finished=True, succeeded=True, finished_at=NOW)
    report = multikueue_dispatch(cluster_id=manager.id, now=NOW, client=OneView(wl))
    record = Workload.objects.get(uid=wl.uid)
    assert record.state == WorkloadState.COMPLETED and report.ended == 1
    assert Reservation.objects.get(workload=record).state == "released"
