"""MultiKueue with the broker as its external dispatcher: the Kueue side (no ORM).

The manager's Kueue runs with ``multiKueue.dispatcherName`` set to a name of ours, so its
MultiKueue controller copies a Workload only to the worker clusters listed in the
Workload's ``status.nominatedClusterNames`` (docs/kubernetes.md, "The broker as
MultiKueue's external dispatcher").  This module reads the manager's Workloads into plain
records and writes nominations; deciding *which* worker is the broker's business
(``broker.services.dispatching.multikueue``).

Nominations are written by server-side apply with field manager ``kueue-admission``, as
Kueue requires (it clears the field with the same manager when a worker admits), carrying
the ``resourceVersion`` the decision was made on: if the Workload changed since (admitted,
evicted, nominated by someone else), the apply fails with 409 and nothing is overwritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from broker.backends.kube.common import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    PRODUCT_LABEL,
    KubeClient,
    KubeConfig,
    KubeRejected,
    condition,
)
from broker.backends.kube.jobs import now_utc

KUEUE_GROUP = "kueue.x-k8s.io"
FIELD_MANAGER = "kueue-admission"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
DEFAULT_DISPATCHER = "gpubroker.io/dispatcher"
# Annotations a submitter may put on the Job (Kueue does not copy them to the Workload):
# where the input data lives and how big it is, as in the broker's own spec.
DATA_LOCATION_ANNOTATION = "gpubroker.io/data-location"
DATA_SIZE_ANNOTATION = "gpubroker.io/data-size-gb"


@dataclass(frozen=True)
class PodSetAsk:
    """One pod set of a Workload: ``count`` pods of ``gpus_per_pod`` GPUs each."""

    name: str
    count: int
    gpus_per_pod: int
    gpu_resource: str = GPU_RESOURCE
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()

    @property
    def gpu_product(self) -> str:
        return self.node_selector.get(PRODUCT_LABEL, "")

    @property
    def mig_profile(self) -> str:
        if self.gpu_resource.startswith(MIG_RESOURCE_PREFIX):
            return self.gpu_resource[len(MIG_RESOURCE_PREFIX) :]
        return ""


@dataclass(frozen=True)
class ManagerWorkload:
    """A manager Workload as the dispatcher needs it."""

    uid: str
    namespace: str
    name: str
    resource_version: str
    local_queue: str
    cluster_queue: str
    priority_class: str
    priority: int | None
    pod_sets: tuple[PodSetAsk, ...]
    created_at: datetime | None
    quota_reserved: bool
    check_state: str  # the MultiKueue admission check's state ("" when none)
    nominated: tuple[str, ...]
    cluster_name: str  # the worker that admitted it
    admitted_at: datetime | None
    finished: bool
    succeeded: bool
    finished_at: datetime | None
    finish_message: str = ""
    data_location: str = ""
    data_size_gb: float = 0.0
    job_name: str = ""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def queue_key(self) -> str:
        return f"{self.namespace}/{self.local_queue}"

    @property
    def nominable(self) -> bool:
        """Kueue reads nominations now: quota reserved on the manager, MultiKueue's check
        Pending, no worker admitted it yet, not finished (workload.go:381, :655)."""
        return self.quota_reserved and self.check_state == "Pending" and not self.cluster_name and not self.finished

    @property
    def gpus(self) -> int:
        return sum(p.count * p.gpus_per_pod for p in self.pod_sets)


@dataclass(frozen=True)
class ManagerView:
    """One read of the manager: its Workloads under MultiKueue and the worker clusters."""

    taken_at: datetime
    workloads: tuple[ManagerWorkload, ...]
    active_workers: frozenset[str]
    inactive_workers: Mapping[str, str]  # worker -> why MultiKueue says it is not active
    all_uids: frozenset[str] = frozenset()  # every Workload on the manager, MultiKueue's or not


def _time(raw: Any) -> datetime | None:
    if not raw:
        return None
    try:
        return datetime.fromisoformat(str(raw))
    except ValueError:
        return None


def _gpu_request(container: Mapping[str, Any]) -> tuple[str, int]:
    resources = container.get("resources") or {}
    asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    for name, value in asked.items():
        if name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX):
            try:
                return name, int(str(value))
            except ValueError:
                return name, 0
    return GPU_RESOURCE, 0


def pod_set_ask(raw: Mapping[str, Any]) -> PodSetAsk:
    pod = (raw.get("template") or {}).get("spec") or {}
    resource, gpus = GPU_RESOURCE, 0
    for container in pod.get("containers") or []:
        name, count = _gpu_request(container)
        if count:
            resource, gpus = name, gpus + count
    return PodSetAsk(
        name=str(raw.get("name", "main")),
        count=int(raw.get("count", 1) or 1),
        gpus_per_pod=gpus,
        gpu_resource=resource,
        node_selector=dict(pod.get("nodeSelector") or {}),
        tolerations=tuple(pod.get("tolerations") or ()),
    )


def _check_state(obj: Mapping[str, Any], checks: Iterable[str]) -> str:
    names = set(checks)
    for acs in (obj.get("status") or {}).get("admissionChecks") or []:
        if acs.get("name") in names:
            return str(acs.get("state", ""))
    return ""


def _owner_job(obj: Mapping[str, Any]) -> tuple[str, str]:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Job":
            return str(ref.get("name", "")), str(ref.get("uid", ""))
    return "", ""


def parse_workload(
    obj: Mapping[str, Any], checks: Iterable[str], job_annotations: Mapping[str, Mapping[str, str]] | None = None
) -> ManagerWorkload:
    """A Kueue Workload (v1beta2) as a record; ``job_annotations``: Job uid -> annotations."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    reserved, admitted, finished = (condition(obj, t) or {} for t in ("QuotaReserved", "Admitted", "Finished"))
    job_name, job_uid = _owner_job(obj)
    notes = (job_annotations or {}).get(job_uid, {})
    try:
        size = float(notes.get(DATA_SIZE_ANNOTATION, 0) or 0)
    except ValueError:
        size = 0.0
    priority_ref = spec.get("priorityClassRef") or {}
    return ManagerWorkload(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        local_queue=str(spec.get("queueName", "")),
        cluster_queue=str((status.get("admission") or {}).get("clusterQueue", "")),
        priority_class=str(priority_ref.get("name", "") or spec.get("priorityClassName", "") or ""),
        priority=spec.get("priority"),
        pod_sets=tuple(pod_set_ask(p) for p in spec.get("podSets") or []),
        created_at=_time(meta.get("creationTimestamp")),
        quota_reserved=reserved.get("status") == "True",
        check_state=_check_state(obj, checks),
        nominated=tuple(status.get("nominatedClusterNames") or ()),
        cluster_name=str(status.get("clusterName", "") or ""),
        admitted_at=_time(admitted.get("lastTransitionTime")) if admitted.get("status") == "True" else None,
        finished=finished.get("status") == "True",
        succeeded=finished.get("status") == "True" and finished.get("reason") == "Succeeded",
        finished_at=_time(finished.get("lastTransitionTime")) if finished.get("status") == "True" else None,
        finish_message=str(finished.get("message", "")),
        data_location=str(notes.get(DATA_LOCATION_ANNOTATION, "")),
        data_size_gb=size,
        job_name=job_name,
    )


class MultiKueueDispatcherClient:
    """Reads one manager and writes nominations; every call bounded (``KubeClient``)."""

    def __init__(self, config: KubeConfig | KubeClient, api_version: str = "v1beta2"):
        self.kube = config if isinstance(config, KubeClient) else KubeClient(config)
        self.api_version = api_version

    def _list(self, plural: str) -> list[dict[str, Any]]:
        custom = self.kube.custom()
        return self.kube.items(custom.list_cluster_custom_object, KUEUE_GROUP, self.api_version, plural)

    def multikueue_checks(self) -> set[str]:
        return {
            (c.get("metadata") or {}).get("name", "")
            for c in self._list("admissionchecks")
            if (c.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER
        }

    def _workers(self) -> tuple[frozenset[str], dict[str, str]]:
        active, inactive = set(), {}
        for mkc in self._list("multikueueclusters"):
            name = (mkc.get("metadata") or {}).get("name", "")
            cond = condition(mkc, "Active") or {}
            if cond.get("status") == "True":
                active.add(name)
            else:
                inactive[name] = str(cond.get("message") or "MultiKueue does not report it Active")
        return frozenset(active), inactive

    def _job_annotations(self) -> dict[str, dict[str, str]]:
        jobs = self.kube.items(self.kube.batch().list_job_for_all_namespaces)
        return {
            str((j.get("metadata") or {}).get("uid", "")): dict((j.get("metadata") or {}).get("annotations") or {})
            for j in jobs
        }

    def view(self) -> ManagerView:
        """The manager's MultiKueue Workloads (those carrying a MultiKueue admission check)."""
        taken_at = now_utc()
        checks = self.multikueue_checks()
        active, inactive = self._workers()
        notes = self._job_annotations()
        out, uids = [], set()
        for obj in self._list("workloads"):
            wl = parse_workload(obj, checks, notes)
            uids.add(wl.uid)
            if wl.check_state or wl.cluster_name or wl.nominated:
                out.append(wl)
        return ManagerView(
            taken_at=taken_at,
            workloads=tuple(out),
            active_workers=active,
            inactive_workers=inactive,
            all_uids=frozenset(uids),
        )

    def nominate(self, wl: ManagerWorkload, workers: list[str]) -> bool:
        """Put ``workers`` (in order) into the Workload's nominations; False when the
        Workload changed since it was read (409) or is gone (404): nothing was written."""
        body = {
            "apiVersion": f"{KUEUE_GROUP}/{self.api_version}",
            "kind": "Workload",
            "metadata": {"name": wl.name, "namespace": wl.namespace, "resourceVersion": wl.resource_version},
            "status": {"nominatedClusterNames": list(workers)},
        }
        try:
            self.kube.call(
                self.kube.custom().patch_namespaced_custom_object_status,
                KUEUE_GROUP,
                self.api_version,
                wl.namespace,
                "workloads",
                wl.name,
                body,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type="application/apply-patch+yaml",
            )
        except KubeRejected as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    def close(self) -> None:
        self.kube.close()
