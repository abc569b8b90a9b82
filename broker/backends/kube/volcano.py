"""Volcano backend: a batch.volcano.sh/v1alpha1 Job (vcjob) gang; state from its PodGroup.

Mapping of the spec (checked against real Volcano v1.14.1): ``schedulerName: volcano``,
``minAvailable = workers`` (the whole gang or nothing), the Volcano Queue from
the project identity, one task "worker" with ``replicas = workers`` and the GPU
limits.  Volcano's controller creates the PodGroup ``<job>-<job uid>``; its
``Unschedulable`` condition (reason ``NotEnoughResources``) says how many
members could be placed: some but not all -> GANG, none -> CAPACITY.

A job Volcano's scheduler preempted (its ``preempt`` or ``reclaim`` action evicts a pod:
an ``Evict`` event on the pod, "Pod is evicted, because of preempt") is restarted in its
queue by our ``PodEvicted: RestartJob`` policy, as Kueue queues an evicted job again: the
broker follows the same job, which says by what it was preempted while it waits, and is
charged for the spans it ran (``status.conditions``), not the wait between them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping

from broker.cluster_report import NodeLevels
from broker.backends.kube.limits import volcano_limits
from broker.local_limits import LocalLimits
from broker.backends.base import (
    DestinationJob,
    JobOutcome,
    JobState,
    ProjectIdentity,
    QueueStats,
    Reason,
    UsageRecord,
)
from broker.backends.kube import inventory as inv
from broker.backends.kube import shares, topology_levels
from broker.backends.kube.topology import volcano_network_topology, with_gang_topology
from broker.backends.json_fields import Fields
from broker.backends.kube.priority import priority_class_of
from broker.backends.kube.common import (
    PRODUCT_LABEL,
    PROJECT_LABEL,
    dns_name,
    is_gpu_resource,
    job_ref,
    label_value,
    object_annotations,
    object_labels,
    worker_pod_spec,
    workload_of,
)
from broker.backends.kube.jobs import KubeJobBackend, note_deleting
from broker.backends.kube.volcano_objects import (
    PHASES,
    gang_reason,
    phase_times,
    pod_group_gpus,
    running_seconds,
    vcjob_gpus,
)
from broker.spec import WorkloadSpec

BATCH = ("batch.volcano.sh", "v1alpha1", "jobs")
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")
QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
HYPERNODES = ("topology.volcano.sh", "v1alpha1", "hypernodes")


class VolcanoBackend(KubeJobBackend):
    """Kubernetes with Volcano.  ``VolcanoBackend(cluster, KubeConfig(...), BackendSettings(...))``."""

    kind = "volcano"
    pod_label = "volcano.sh/job-name"

    # ---- the spec mapping -----------------------------------------------------------
    def build_manifest(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> dict[str, Any]:
        labels = object_labels(spec, workload_id)
        pod = with_gang_topology(worker_pod_spec(spec, workload_id, self.settings), spec, workload_id, self.settings)
        pod["activeDeadlineSeconds"] = spec.time_limit_minutes * 60
        _gpu_requests(pod)
        body: dict[str, Any] = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {
                "name": dns_name(workload_id, spec.name),
                "namespace": self.namespace_for(identity),
                "labels": labels,
                "annotations": object_annotations(spec, workload_id, identity.tenant),
            },
            "spec": {
                "schedulerName": "volcano",
                "minAvailable": spec.workers,  # gang: all workers or none
                "queue": self.queue_for(identity),
                # The broker decides about reruns.  maxRetry 0 is not kept (the webhook
                # reads 0 as unset and writes 3): a failed or evicted worker ends the job.
                "policies": [
                    {"event": "PodFailed", "action": "TerminateJob"},
                    # Volcano's preempt or reclaim, or a drained node: queued again there
                    # (the webhook's maxRetry, 3, bounds how often)
                    {"event": "PodEvicted", "action": "RestartJob"},
                ],
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": spec.workers,
                        "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
                    }
                ],
            },
        }
        if spec.workers > 1:
            body["spec"]["plugins"] = {"env": [], "svc": []}  # ranks and peer hostnames
        network = volcano_network_topology(spec, self.settings)
        if network:
            body["spec"]["networkTopology"] = network
        priority = priority_class_of(spec, self.settings.priority_classes)
        if priority:
            body["spec"]["priorityClassName"] = priority
        return body

    # ---- object access --------------------------------------------------------------
    def _create(self, namespace: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        group, version, plural = BATCH
        self.kube.call(
            self.kube.custom().create_namespaced_custom_object, group, version, namespace, plural, body, headers=headers
        )

    def _get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(BATCH, namespace, name)

    def _read(self, gvp: tuple[str, str, str], namespace: str, name: str) -> dict[str, Any] | None:
        custom = self.kube.custom()
        if namespace:
            return self.kube.call(
                custom.get_namespaced_custom_object, gvp[0], gvp[1], namespace, gvp[2], name, missing_ok=True
            )
        return self.kube.call(custom.get_cluster_custom_object, *gvp, name, missing_ok=True)

    def _list(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self._all(BATCH, label_selector=label_selector)

    def _all(self, gvp: tuple[str, str, str], **kwargs: Any) -> list[dict[str, Any]]:
        return self.kube.items(self.kube.custom().list_cluster_custom_object, *gvp, **kwargs)

    def _delete(self, namespace: str, name: str) -> None:
        group, version, plural = BATCH
        self.kube.call(
            self.kube.custom().delete_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            name,
            propagation_policy="Foreground",
            missing_ok=True,
        )

    def _pod_group(self, job: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = Fields(job).obj("metadata")
        name = f"{meta.text('name')}-{meta.text('uid')}"  # Volcano's naming since v1.x
        return self._read(PODGROUPS, meta.text("namespace"), name)

    def _queue(self, queue: str, cache: dict[str, dict[str, Any] | None]) -> dict[str, Any] | None:
        if queue not in cache:
            cache[queue] = self._read(QUEUES, "", queue)
        return cache[queue]

    def _events(self, obj: Mapping[str, Any] | None) -> tuple[str, ...]:
        """Messages of the object's events, newest first (read only for a waiting gang)."""
        meta = Fields(obj).obj("metadata")
        if not meta.text("uid"):
            return ()
        items = self.kube.items(
            self.kube.core().list_namespaced_event,
            meta.text("namespace"),
            field_selector=f"involvedObject.uid={meta.text('uid')}",
        )
        events = [Fields(e, (f"events[{i}]",)) for i, e in enumerate(items)]
        events.sort(key=lambda e: e.text("lastTimestamp") or e.text("eventTime"), reverse=True)
        return tuple(e.text("message") for e in events)

    def _outcome(self, obj: dict[str, Any]) -> JobOutcome:
        """A job that ended on an eviction (one sent before RestartJob, or past its retries)
        ends in Volcano's words: its pods are gone, and Terminated says nothing of why."""
        evicted = self._evicted(obj) if PHASES.get(_phase(obj)) == JobState.FAILED else ""
        return JobOutcome(summary=evicted, end_reason="Evict") if evicted else super()._outcome(obj)

    def _evicted(self, job: Mapping[str, Any]) -> str:
        """Volcano's word when its scheduler evicted one of the job's pods (``<job>-<task>-<i>``),
        with the pod's name; "" when none was (read only for a job restarted or ended failed)."""
        meta = Fields(job).obj("metadata")
        tasks = {f"{meta.text('name')}-{t.text('name')}-" for t in Fields(job).obj("spec").objs("tasks")}
        items = self.kube.items(
            self.kube.core().list_namespaced_event,
            meta.text("namespace"),
            field_selector="involvedObject.kind=Pod,reason=Evict",
        )
        for i, raw in enumerate(items):
            event = Fields(raw, (f"events[{i}]",))
            pod = event.obj("involvedObject").text("name")
            if any(pod.startswith(t) and pod[len(t) :].isdigit() for t in tasks):
                return f"Volcano evicted pod {pod}: {event.text('message')}"
        return ""

    # ---- describing -----------------------------------------------------------------
    def _describe(self, objs: list[dict[str, Any]]) -> list[DestinationJob]:
        queues: dict[str, dict[str, Any] | None] = {}
        out = []
        for job in objs:
            pg = None
            if _phase(job) == "Pending":
                pg = self._pod_group(job)
            described = self.describe(job, pg, queues)
            if described.state == JobState.RUNNING:
                described = replace(described, nodes=self._job_nodes(job))
            if described.state == JobState.PENDING and Fields(job).obj("status").value("retryCount"):
                # restarted: say by what it was preempted, then why it waits now
                evicted = self._evicted(job)
                if evicted:
                    described = replace(described, raw_reason=f"{evicted}; now: {described.raw_reason}")
            out.append(note_deleting(job, described))
        return out

    def describe(
        self,
        job: Mapping[str, Any],
        pod_group: Mapping[str, Any] | None,
        queues: dict[str, dict[str, Any] | None] | None = None,
    ) -> DestinationJob:
        """``queues``: the Volcano Queues read so far (a pass over many jobs shares them)."""
        queues = {} if queues is None else queues
        state = PHASES.get(_phase(job), JobState.UNKNOWN)
        reason, raw = Reason.NONE, Fields(job).obj("status", "state").text("message")
        if state == JobState.PENDING:
            reason, raw = self._waiting(job, pod_group, queues)
        start, end = phase_times(job)
        return DestinationJob(
            job_id=job_ref(job),
            workload_id=workload_of(job),
            state=state,
            reason=reason,
            raw_reason=raw,
            gpus=vcjob_gpus(job),
            started_at=start,
            ended_at=end if state.ended else None,
        )

    def _waiting(
        self, job: Mapping[str, Any], pod_group: Mapping[str, Any] | None, queues: dict[str, dict[str, Any] | None]
    ) -> tuple[Reason, str]:
        name = Fields(job).obj("spec").text("queue", "default")
        queue = self._queue(name, queues)
        queue_state = (Fields(queue).obj("status").text("state") or "Open") if queue else "Missing"
        pg_status = Fields(pod_group).obj("status")
        waiting = (
            pod_group is not None
            and pg_status.text("phase", "Pending") == "Pending"
            and not pg_status.array("conditions")
        )
        return gang_reason(
            pod_group,
            queue_state,
            name,
            self._events(pod_group) if waiting else (),
            Fields(queue).obj("spec", "capability").raw,
        )

    def _job_nodes(self, job: Mapping[str, Any]) -> tuple[str, ...]:
        meta = Fields(job).obj("metadata")
        pods = self.kube.items(
            self.kube.core().list_namespaced_pod,
            meta.text("namespace"),
            label_selector=f"volcano.sh/job-name={meta.text('name')}",
        )
        return tuple(
            sorted({Fields(p, (f"pods[{i}]",)).obj("spec").text("nodeName") for i, p in enumerate(pods)} - {""})
        )

    def active_jobs(self) -> list[DestinationJob]:
        groups = {_owner_uid(pg): pg for pg in self._all(PODGROUPS)}
        queues: dict[str, dict[str, Any] | None] = {}
        out = []
        for job in self._list():
            if vcjob_gpus(job) <= 0:
                continue
            uid = Fields(job).obj("metadata").text("uid")
            described = self.describe(job, groups.get(uid), queues)
            if not described.state.ended:
                out.append(described)
        return out

    # ---- calibration (broker/calibration/kube.py) -----------------------------------
    def calibration_jobs(self, namespace: str, project: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """One project's vcjobs in a namespace, each with its PodGroup (once Volcano's
        controller made it): two list calls, paired as ``active_jobs`` pairs them."""
        custom = self.kube.custom()
        selector = f"{PROJECT_LABEL}={label_value(project)}"
        jobs = self.kube.items(custom.list_namespaced_custom_object, *_in(BATCH, namespace), label_selector=selector)
        pod_groups = self.kube.items(custom.list_namespaced_custom_object, *_in(PODGROUPS, namespace))
        groups = {_owner_uid(pg): pg for pg in pod_groups}
        return [(job, groups.get(Fields(job).obj("metadata").text("uid"))) for job in jobs]

    # ---- inventory and accounting ---------------------------------------------------
    def pool_namer(self) -> Callable[..., str]:
        return inv.product_namer

    def node_topology(self, nodes: list[dict[str, Any]]) -> NodeLevels:
        """The HyperNodes holding each node (none where Volcano serves no HyperNode: a
        release before 1.12)."""
        found = self.kube.call(self.kube.custom().list_cluster_custom_object, *HYPERNODES, missing_ok=True)
        return topology_levels.volcano_levels(list((found or {}).get("items") or []), nodes)

    def local_limits(self) -> LocalLimits:
        """Each Queue's GPU capability against what it has allocated."""
        return volcano_limits(self._all(QUEUES), self.settings.default_queue)

    def queue_stats(self) -> QueueStats:
        """PodGroups not yet running (Pending/Inqueue) and the GPUs their gangs need."""
        waiting = [
            pg
            for pg in self._all(PODGROUPS)
            if Fields(pg).obj("status").text("phase", "Pending") in ("Pending", "Inqueue")
        ]
        return QueueStats(pending_jobs=len(waiting), pending_gpus=sum(pod_group_gpus(pg) for pg in waiting))

    def usage(self, since: datetime) -> Iterator[UsageRecord]:
        """First Running transition to the terminal transition, times the gang's GPUs."""
        products: dict[str, str] | None = None
        ratios = shares.ReplicaRatios(lambda: inv.read_nodes(self.kube, self.settings))
        for job in self._list():
            start, end = phase_times(job)
            ran_s = running_seconds(job, end)
            gpus = vcjob_gpus(job)
            state = PHASES.get(_phase(job), JobState.UNKNOWN)
            end = end if state.ended else None
            if start is None or gpus <= 0 or (end is not None and end < since):
                continue
            model = _selected_product(job)
            if not model:
                products = self._products_by_job() if products is None else products
                model = products.get(job_ref(job), "unknown")
            yield UsageRecord(
                source="volcano",
                cluster=self.cluster,
                job_id=job_ref(job),
                workload_id=workload_of(job),
                account=Fields(job).obj("metadata").text("namespace"),
                gpu_model=self.settings.model_names.get(model, model),
                gpus=gpus,
                start=start,
                end=end,
                gpu_seconds=round(
                    gpus * ran_s / shares.vcjob_share(job, ratios)
                ),  # a job of shares: their part of a GPU
                state=state.value,
            )

    def _products_by_job(self) -> dict[str, str]:
        """Job ref -> GPU product of the node its pods ran on (no selector in the spec)."""
        core = self.kube.core()
        nodes = {}
        for i, raw in enumerate(self.kube.items(core.list_node)):
            meta = Fields(raw, (f"nodes[{i}]",)).obj("metadata")
            nodes[meta.text("name")] = meta.texts("labels").get(PRODUCT_LABEL, "")
        out = {}
        for i, raw in enumerate(
            self.kube.items(core.list_pod_for_all_namespaces, label_selector="volcano.sh/job-name")
        ):
            pod = Fields(raw, (f"pods[{i}]",))
            meta = pod.obj("metadata")
            product = nodes.get(pod.obj("spec").text("nodeName"))
            if product:
                out[f"{meta.text('namespace')}/{meta.texts('labels').get('volcano.sh/job-name', '')}"] = product
        return out


def _gpu_requests(pod: dict[str, Any]) -> None:
    """GPU requests beside the limits: the API server copies limits into requests only for
    Pods, and Volcano builds the PodGroup's minResources (what the queue capability and the
    enqueue step weigh) from the vcjob's template requests, so a limit alone counts 0 GPUs."""
    for container in pod.get("containers") or []:
        res = container.setdefault("resources", {})
        requests = res.setdefault("requests", {})
        for name, value in (res.get("limits") or {}).items():
            if is_gpu_resource(name):
                requests.setdefault(name, value)


def _selected_product(job: Mapping[str, Any]) -> str:
    for task in Fields(job).obj("spec").objs("tasks"):
        selector = task.obj("template", "spec").texts("nodeSelector")
        if PRODUCT_LABEL in selector:
            return selector[PRODUCT_LABEL]
    return ""


def _in(gvp: tuple[str, str, str], namespace: str) -> tuple[str, str, str, str]:
    return gvp[0], gvp[1], namespace, gvp[2]


def _phase(job: Mapping[str, Any]) -> str:
    return Fields(job).obj("status", "state").text("phase") or "Pending"


def _owner_uid(obj: Mapping[str, Any]) -> str:
    for owner in Fields(obj).obj("metadata").objs("ownerReferences"):
        if owner.value("kind") == "Job":
            return owner.text("uid")
    return ""
