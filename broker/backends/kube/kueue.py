"""Kueue backend: a suspended, queue-labelled batch/v1 Indexed Job; state from its Workload.

Mapping of the spec (Kueue v0.19.2, see shared/crds/FACTS.md):
- one Indexed Job, ``parallelism = completions = workers``, each pod one worker
  with ``nvidia.com/gpu`` (or ``nvidia.com/mig-<profile>``, MIG "mixed") limits;
- created with ``spec.suspend: true`` and label ``kueue.x-k8s.io/queue-name``,
  so nothing starts before Kueue admits it; priority via the
  ``kueue.x-k8s.io/priority-class`` label (WorkloadPriorityClass);
- the broker's workload id as label/annotation and inside the Job name.
Kueue creates the Workload (label ``kueue.x-k8s.io/job-uid``) whose conditions
say where the job stands; pending messages are normalised into a Reason.
"""

from __future__ import annotations

import re

from dataclasses import replace
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping

from broker.cluster_report import NodeLevels
from broker.backends.kube.limits import kueue_limits
from broker.local_limits import LocalLimits
from broker.backends.base import DestinationJob, JobState, ProjectIdentity, QueueStats, Reason, UsageRecord
from broker.backends.kube import inventory as inv, topology_levels
from broker.backends.kube.shares import ReplicaRatios as Ratios, workload_share
from broker.backends.kube.topology import kueue_pod_annotations, with_gang_topology
from broker.backends.json_fields import Fields
from broker.backends.kube.priority import priority_class_of
from broker.backends.kube.common import (
    PRODUCT_LABEL,
    PROJECT_LABEL,
    condition_fields,
    dns_name,
    is_gpu_resource,
    is_true,
    job_ref,
    label_value,
    object_annotations,
    object_labels,
    parse_time,
    pod_gpus,
    quantity,
    worker_pod_spec,
    workload_of,
)
from broker.backends.kube.jobs import KubeJobBackend, note_deleting, seconds_between
from broker.spec import WorkloadSpec

KUEUE_GROUP = "kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
_STOP_REASONS = {"ClusterQueueStopped", "LocalQueueStopped"}


_POD_SET_RE = re.compile(r"couldn't assign flavors to pod set [^:]+: ")
_POLICY_WORDS = (
    "maximum capacity",
    "doesn't match node affinity",
    "unavailable in clusterqueue",
    "doesn't match",
    "untolerated taint",
)


def classify_pending(reason: str, message: str) -> Reason:
    """Kueue's pending text -> Reason; the worst verdict across pod sets wins.

    Quota that is merely in use waits (CAPACITY); a request above the maximum
    capacity can never be admitted there (POLICY); a missing or stopped queue is
    UNAVAILABLE.  Both the default "Pending" reason (message wording) and the
    granular reasons of the UnadmittedWorkloadsObservability gate are read.

    Within one pod set Kueue lists every flavor it tried ("flavor h100 doesn't match node
    affinity, insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed":
    captured in data/real/kueue-workload-pending-quota.json); one flavor that only lacks
    *unused* quota means waiting helps, whatever the other flavors say.
    """
    text = message.lower()
    if reason in ("Inadmissible", "Misconfigured") or any(
        w in text for w in ("is inactive", "not found", "doesn't exist", "is stopped", "is on hold")
    ):
        return Reason.UNAVAILABLE
    if reason in ("ExceedsMaxQuota", "NoMatchingFlavor"):
        return Reason.POLICY
    if reason in ("WaitingForQuota", "WaitingForPreemptedWorkloads"):
        return Reason.CAPACITY
    verdicts = [_pod_set_verdict(part) for part in _POD_SET_RE.split(text) if part.strip()]
    worst = max(verdicts, key=_SEVERITY.index, default=Reason.OTHER)
    if worst != Reason.OTHER:
        return worst
    if reason == "Suspended":
        return Reason.HELD
    if reason in ("WaitingForPodsReady", "PendingEvaluation"):
        return Reason.WAITING
    return Reason.OTHER


_SEVERITY = [Reason.OTHER, Reason.CAPACITY, Reason.POLICY]


def _pod_set_verdict(text: str) -> Reason:
    """The best flavor of one pod set decides: any flavor short of unused quota -> CAPACITY."""
    if "insufficient unused quota" in text:
        return Reason.CAPACITY
    if any(w in text for w in _POLICY_WORDS):
        return Reason.POLICY
    return Reason.OTHER


def _ended_by_job(job: Mapping[str, Any]) -> tuple[JobState, str] | None:
    for ctype, state in (("Complete", JobState.COMPLETED), ("Failed", JobState.FAILED)):
        cond = condition_fields(job, ctype)
        if cond and cond.value("status") == "True":
            return state, cond.text("message") or cond.text("reason")
    return None


def _checks_text(wl: Fields) -> str:
    checks = wl.obj("status").objs("admissionChecks")
    return "; ".join(f"{c.text('name')}: {c.text('state')} {c.text('message')}".strip() for c in checks)


def _pending(wl: Mapping[str, Any]) -> tuple[JobState, Reason, str]:
    read = Fields(wl)
    if read.obj("spec").value("active") is False:
        return JobState.PENDING, Reason.HELD, "Workload deactivated (spec.active=false)"
    if is_true(wl, "QuotaReserved"):
        # quota held, admission checks (MultiKueue, provisioning) not yet satisfied
        adm = condition_fields(wl, "Admitted") or Fields({})
        return JobState.PENDING, Reason.WAITING, _checks_text(read) or adm.text("message")
    evicted = condition_fields(wl, "Evicted")
    preempted = evicted is not None and evicted.value("status") == "True"
    if evicted and preempted and evicted.value("reason") in _STOP_REASONS:
        return JobState.PENDING, Reason.UNAVAILABLE, evicted.text("message")
    qr = condition_fields(wl, "QuotaReserved") or Fields({})
    raw = qr.text("message")
    reason = classify_pending(qr.text("reason"), raw) if raw else Reason.OTHER
    if evicted and preempted and reason in (Reason.OTHER, Reason.NONE):
        reason, raw = Reason.CAPACITY, evicted.text("message") or raw  # preempted
    elif evicted and preempted and evicted.value("reason") == "Preempted" and evicted.text("message"):
        # Kueue keeps Evicted=True (reason Preempted) while the Workload waits to be admitted
        # again: say by what it was preempted, then why it waits now
        raw = f"{evicted.text('message')}; {raw}"
    return JobState.PENDING, reason, raw or "waiting for Kueue to evaluate the Workload"


def kueue_state(job: Mapping[str, Any], wl: Mapping[str, Any] | None) -> tuple[JobState, Reason, str]:
    """(state, normalised reason, raw text) of a Job and its Workload."""
    ended = _ended_by_job(job)
    if ended:
        return ended[0], Reason.NONE, ended[1]
    if wl is not None and is_true(wl, "Finished"):
        fin = condition_fields(wl, "Finished") or Fields({})
        state = JobState.COMPLETED if fin.value("reason") == "Succeeded" else JobState.FAILED
        return state, Reason.NONE, fin.text("message")
    if wl is None:
        read = Fields(job)
        if read.obj("spec").value("suspend"):
            return JobState.PENDING, Reason.OTHER, "no Kueue Workload yet (is the queue right?)"
        active = read.obj("status").whole("active")
        return (JobState.RUNNING if active else JobState.PENDING), Reason.NONE, ""
    if is_true(wl, "Evicted") and is_true(wl, "QuotaReserved"):
        # Kueue marks the eviction first, then stops the Job, and only then gives the quota
        # back (it clears Evicted when it reserves quota again): the Workload is being
        # stopped, whatever its pods look like meanwhile
        return _evicted(Fields(wl), condition_fields(wl, "Evicted") or Fields({}))
    if is_true(wl, "Admitted"):
        return _admitted(job, wl)
    return _pending(wl)


def _evicted(read: Fields, evicted: Fields) -> tuple[JobState, Reason, str]:
    if evicted.value("reason") in _STOP_REASONS:
        return JobState.PENDING, Reason.UNAVAILABLE, evicted.text("message")
    return JobState.PENDING, Reason.CAPACITY, evicted.text("message") or _checks_text(read)


def _admitted(job: Mapping[str, Any], wl: Mapping[str, Any]) -> tuple[JobState, Reason, str]:
    """Admission only unsuspends the Job: it runs once its pods do.  Real Kueue reports
    Admitted=True with PodsReady=False/WaitForStart while the pods are still being created
    and scheduled (data/real/kueue-workload-admitted.json)."""
    ready = condition_fields(wl, "PodsReady") or Fields({})
    if is_true(wl, "PodsReady") or Fields(job).obj("status").whole("ready") > 0:
        return JobState.RUNNING, Reason.NONE, ""
    if ready.value("reason") == "WaitForRecovery":
        # its pods were all ready once and one failed: the Job still holds its GPUs and
        # recreates the pod (Kueue evicts it only if recovery times out), so it runs on
        return JobState.RUNNING, Reason.NONE, ""
    detail = ": ".join(x for x in (ready.text("reason"), ready.text("message")) if x)
    return JobState.PENDING, Reason.WAITING, f"admitted by Kueue, pods not running yet ({detail})"


def job_gpus(job: Mapping[str, Any]) -> int:
    spec = Fields(job).obj("spec")
    pods = spec.whole("parallelism") or 1
    return pods * pod_gpus(spec.obj("template", "spec"))


class KueueBackend(KubeJobBackend):
    """Kubernetes with Kueue.  ``KueueBackend(cluster, KubeConfig(...), BackendSettings(...))``."""

    kind = "kueue"

    def __init__(self, *args: Any, api_version: str = "v1beta2", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.api_version = api_version  # v1beta2 is the storage version in Kueue 0.19

    # ---- the spec mapping -----------------------------------------------------------
    def build_manifest(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> dict[str, Any]:
        extra = {QUEUE_LABEL: self.queue_for(identity)}
        if name := priority_class_of(spec, self.settings.priority_classes):
            extra[PRIORITY_LABEL] = name
        labels = object_labels(spec, workload_id, extra)
        pod = with_gang_topology(worker_pod_spec(spec, workload_id, self.settings), spec, workload_id, self.settings)
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": dns_name(workload_id, spec.name),
                "namespace": self.namespace_for(identity),
                "labels": labels,
                "annotations": object_annotations(spec, workload_id, identity.tenant),
            },
            "spec": {
                "suspend": True,  # Kueue unsuspends on admission
                "completionMode": "Indexed",  # stable ranks: JOB_COMPLETION_INDEX
                "parallelism": spec.workers,
                "completions": spec.workers,
                "backoffLimit": 0,  # the broker decides about reruns
                "activeDeadlineSeconds": spec.time_limit_minutes * 60,
                "template": {"metadata": {"labels": dict(labels), **self._annotations(spec)}, "spec": pod},
            },
        }

    def _annotations(self, spec: WorkloadSpec) -> dict[str, Any]:
        """Topology-Aware Scheduling's pod set annotation; a job naming a level reads the
        cluster's Topology levels to find that level's node label."""
        asked = spec.level_required or spec.level_preferred
        levels = self._topology_labels() if asked and self.settings.kueue_topology else ()
        tas = kueue_pod_annotations(spec, self.settings, levels)
        return {"annotations": tas} if tas else {}

    def _topology_labels(self) -> tuple[str, ...]:
        found = self.kube.call(
            self.kube.custom().list_cluster_custom_object, KUEUE_GROUP, self.api_version, "topologies", missing_ok=True
        )
        return topology_levels.topology_labels(list((found or {}).get("items") or []))

    # ---- object access --------------------------------------------------------------
    def _create(self, namespace: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self.kube.call(self.kube.batch().create_namespaced_job, namespace, body, headers=headers)

    def _get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.kube.call(self.kube.batch().read_namespaced_job, name, namespace, missing_ok=True)

    def _list(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.kube.items(self.kube.batch().list_job_for_all_namespaces, label_selector=label_selector)

    def _delete(self, namespace: str, name: str) -> None:
        # Foreground: the Job disappears only after its pods (and Workload) are gone.
        self.kube.call(
            self.kube.batch().delete_namespaced_job, name, namespace, propagation_policy="Foreground", missing_ok=True
        )

    def _custom(self, plural: str, namespace: str = "", **kwargs: Any) -> list[dict[str, Any]]:
        custom = self.kube.custom()
        if namespace:
            return self.kube.items(
                custom.list_namespaced_custom_object, KUEUE_GROUP, self.api_version, namespace, plural, **kwargs
            )
        return self.kube.items(custom.list_cluster_custom_object, KUEUE_GROUP, self.api_version, plural, **kwargs)

    def _workload_for(self, job: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = Fields(job).obj("metadata")
        uid = meta.text("uid")
        wls = self._custom("workloads", meta.text("namespace"), label_selector=f"{JOB_UID_LABEL}={uid}")
        return _owned(wls, uid)

    def _job_nodes(self, job: Mapping[str, Any]) -> tuple[str, ...]:
        meta = Fields(job).obj("metadata")
        pods = self.kube.items(
            self.kube.core().list_namespaced_pod,
            meta.text("namespace"),
            label_selector=f"batch.kubernetes.io/job-name={meta.text('name')}",
        )
        names = {name for i, p in enumerate(pods) if (name := Fields(p, (f"pods[{i}]",)).obj("spec").text("nodeName"))}
        return tuple(sorted(names))

    # ---- describing -----------------------------------------------------------------
    def _describe(self, objs: list[dict[str, Any]]) -> list[DestinationJob]:
        out = []
        for job in objs:
            described = self.describe(job, self._workload_for(job))
            if described.state == JobState.RUNNING:
                described = replace(described, nodes=self._job_nodes(job))
            out.append(note_deleting(job, described))
        return out

    def describe(self, job: Mapping[str, Any], wl: Mapping[str, Any] | None) -> DestinationJob:
        state, reason, raw = kueue_state(job, wl)
        status = Fields(wl).obj("status")
        admitted, finished = condition_fields(wl or {}, "Admitted"), condition_fields(wl or {}, "Finished")
        started = (
            parse_time(admitted.text("lastTransitionTime")) if admitted and admitted.value("status") == "True" else None
        )
        ended = (
            parse_time(finished.text("lastTransitionTime"))
            if state.ended and finished
            else parse_time(Fields(job).obj("status").text("completionTime"))
            if state.ended
            else None
        )
        nominated = status.strings("nominatedClusterNames")
        if state == JobState.PENDING and nominated:
            raw = f"{raw} (nominated: {', '.join(nominated)})".strip()
        return DestinationJob(
            job_id=job_ref(job),
            workload_id=workload_of(job),
            state=state,
            reason=reason,
            raw_reason=raw,
            gpus=job_gpus(job),
            started_at=started,
            ended_at=ended,
            worker_cluster=status.text("clusterName"),
        )

    def active_jobs(self) -> list[DestinationJob]:
        by_uid = _index_by_owner(self._custom("workloads"))
        out = []
        for job in self._list():
            if job_gpus(job) <= 0:
                continue
            uid = Fields(job).obj("metadata").text("uid")
            described = self.describe(job, by_uid.get(uid))
            if not described.state.ended:
                out.append(described)
        return out

    # ---- calibration (broker/calibration/kube.py) -------------------------------------
    def calibration_jobs(self, namespace: str, project: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """One project's Jobs in a namespace, each with its Workload (if Kueue made it yet):
        two list calls, paired as ``active_jobs`` pairs them."""
        jobs = self.kube.items(
            self.kube.batch().list_namespaced_job, namespace, label_selector=f"{PROJECT_LABEL}={label_value(project)}"
        )
        by_uid = _index_by_owner(self._custom("workloads", namespace))
        return [(job, by_uid.get(Fields(job).obj("metadata").text("uid"))) for job in jobs]

    # ---- inventory and accounting ---------------------------------------------------
    def pool_namer(self) -> Callable[..., str]:
        return inv.flavor_namer(self._custom("resourceflavors"))

    def pools_and_levels(self, nodes: list[dict[str, Any]]) -> tuple[Callable[..., str], NodeLevels]:
        """The ResourceFlavors read once for both: pools are named by them, and they name the
        Topology of their nodes (no levels where Kueue serves no Topology: a release before
        Topology-Aware Scheduling)."""
        flavors = self._custom("resourceflavors")
        return inv.flavor_namer(flavors), self._levels(nodes, flavors)

    def _levels(self, nodes: list[dict[str, Any]], flavors: list[dict[str, Any]]) -> NodeLevels:
        custom = self.kube.custom()
        found = self.kube.call(
            custom.list_cluster_custom_object, KUEUE_GROUP, self.api_version, "topologies", missing_ok=True
        )
        topologies = list((found or {}).get("items") or [])
        if not topologies:
            return {}
        return topology_levels.kueue_levels(topologies, flavors, nodes)

    def queue_stats(self) -> QueueStats:
        """ClusterQueue pendingWorkloads, plus the GPUs those pending Workloads ask for."""
        cqs = self._custom("clusterqueues")
        pending = sum(Fields(cq).obj("status").whole("pendingWorkloads") for cq in cqs)
        gpus = sum(
            workload_gpus(wl)
            for wl in self._custom("workloads")
            if not is_true(wl, "QuotaReserved") and not is_true(wl, "Finished")
        )
        return QueueStats(pending_jobs=pending, pending_gpus=gpus)

    def local_limits(self) -> LocalLimits:
        """ClusterQueue nominal quota, borrowing limit and reserved use per GPU flavor."""
        return kueue_limits(
            self._custom("clusterqueues"),
            self._custom("localqueues"),
            self.settings.default_namespace,
            self.settings.default_queue,
        )

    def usage(self, since: datetime) -> Iterator[UsageRecord]:
        """Admission (Admitted lastTransitionTime) to Finished, plus the runs before any
        eviction (Kueue keeps their seconds), times the admitted GPUs."""
        jobs = {Fields(j).obj("metadata").text("uid"): j for j in self._list()}
        products = _flavor_products(self._custom("resourceflavors"))
        ratios = Ratios(lambda: inv.read_nodes(self.kube, self.settings))
        for wl in self._custom("workloads"):
            record = self._usage_record(wl, jobs, products, ratios)
            if record and (record.end is None or record.end >= since):
                yield record

    def _usage_record(
        self, wl: Mapping[str, Any], jobs: Mapping[str, Any], products: Mapping[str, str], ratios: Ratios
    ) -> UsageRecord | None:
        admitted = condition_fields(wl, "Admitted")
        if not admitted or admitted.value("status") != "True":
            return None
        start = parse_time(admitted.text("lastTransitionTime"))
        gpus = workload_gpus(wl, admitted_only=True)
        if start is None or gpus <= 0:
            return None
        fin = condition_fields(wl, "Finished")
        end = parse_time(fin.text("lastTransitionTime")) if fin and fin.value("status") == "True" else None
        job = jobs.get(_owner_uid(wl)) or {}
        meta = Fields(wl).obj("metadata")
        state = (
            "running"
            if end is None or fin is None
            else ("completed" if fin.value("reason") == "Succeeded" else "failed")
        )
        return UsageRecord(
            source="kueue",
            cluster=self.cluster,
            job_id=job_ref(job) if job else f"{meta.text('namespace')}/{meta.text('name')}",
            workload_id=workload_of(job) if job else None,
            account=meta.text("namespace"),
            gpu_model=self._model_of(wl, job, products),
            gpus=gpus,
            start=start,
            end=end,
            # a job of GPU shares: its replicas' part of a GPU
            gpu_seconds=round(gpus * (seconds_between(start, end) + _earlier_runs_s(wl)) / workload_share(wl, ratios)),
            state=state,
        )

    def _model_of(self, wl: Mapping[str, Any], job: Mapping[str, Any], products: Mapping[str, str]) -> str:
        product = ""
        for psa in Fields(wl).obj("status", "admission").objs("podSetAssignments"):
            for resource, flavor in psa.texts("flavors").items():
                if is_gpu_resource(resource):
                    product = products.get(flavor, flavor)
        if not product:
            selector = Fields(job).obj("spec", "template", "spec").texts("nodeSelector")
            product = selector.get(PRODUCT_LABEL, "unknown")
        return self.settings.model_names.get(product, product)


def workload_gpus(wl: Mapping[str, Any], admitted_only: bool = False) -> int:
    """GPUs of a Workload: the admitted resourceUsage, else count x per-pod request."""
    read = Fields(wl)
    total = 0
    for psa in read.obj("status", "admission").objs("podSetAssignments"):
        usage = psa.obj("resourceUsage")
        total += sum(quantity(v, usage.at(k)) for k, v in usage.raw.items() if is_gpu_resource(k))
    if total or admitted_only:
        return total
    for ps in read.obj("spec").objs("podSets"):
        total += ps.whole("count") * pod_gpus(ps.obj("template", "spec"))
    return total


def _owner_uid(obj: Mapping[str, Any]) -> str:
    meta = Fields(obj).obj("metadata")
    for owner in meta.objs("ownerReferences"):
        if owner.value("controller") or owner.value("kind") == "Job":
            return owner.text("uid")
    return meta.obj("labels").text(JOB_UID_LABEL)


def _owned(wls: list[dict[str, Any]], uid: str) -> dict[str, Any] | None:
    for wl in wls:
        if _owner_uid(wl) == uid:
            return wl
    return None


def _index_by_owner(wls: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {_owner_uid(wl): wl for wl in wls}


def _flavor_products(flavors: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for i, raw in enumerate(flavors):
        flavor = Fields(raw, (f"resourceflavors[{i}]",))
        labels = flavor.obj("spec").texts("nodeLabels")
        if PRODUCT_LABEL in labels:
            out[flavor.obj("metadata").text("name")] = labels[PRODUCT_LABEL]
    return out


def _earlier_runs_s(wl: Mapping[str, Any]) -> int:
    """Seconds the Workload was admitted before its evictions (a preempted job queued again
    and admitted anew): Kueue keeps them in its status, spelt with a typo in v1beta1."""
    status = Fields(wl).obj("status")
    return max(
        status.whole("accumulatedPastExecutionTimeSeconds"), status.whole("accumulatedPastExexcutionTimeSeconds")
    )
