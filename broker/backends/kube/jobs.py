"""The part of the contract every Kubernetes job kind shares: create-or-adopt, find,
status, cancel.  Subclasses say how to build, read and describe their object.

Idempotency: the object name is derived from the workload id alone (plus the
spec name), so a retried submit after a lost reply hits the same name and the
API server answers 409; we then adopt the existing object instead of creating
a second one.  ``find`` looks the workload up by label, across namespaces.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Sequence

from broker.cluster_report import NodeLevels
from broker.local_limits import LocalLimits
from broker.backends.base import (
    DestinationJob,
    InventorySnapshot,
    JobOutcome,
    LogPage,
    ProjectIdentity,
    QueueStats,
    Rejected,
    Unavailable,
    UsageRecord,
)
from broker.backends.kube import inventory as inv
from broker.backends.kube import pods
from broker.backends.kube.common import (
    WORKLOAD_LABEL,
    KubeClient,
    KubeConfig,
    KubeRejected,
    first,
    impersonation_headers,
    job_ref,
    label_value,
    split_ref,
    workload_of,
)
from broker.backends.kube.settings import BackendSettings
from broker.spec import WorkloadSpec


class KubeJobBackend:
    """Base of the Kueue and Volcano backends (not a backend by itself)."""

    kind = "kube"
    pod_label = "batch.kubernetes.io/job-name"  # the label naming a pod's job

    def __init__(
        self,
        cluster: str,
        config: KubeConfig | None = None,
        settings: BackendSettings | None = None,
        *,
        client: KubeClient | None = None,
    ):
        self.cluster = cluster
        self.settings = settings or BackendSettings()
        self.kube = client or KubeClient(config or KubeConfig())

    # ---- hooks for subclasses -------------------------------------------------------
    def build_manifest(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> dict[str, Any]:
        raise NotImplementedError

    def _create(self, namespace: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        """``headers``: extra request headers (user impersonation) for this one call."""
        raise NotImplementedError

    def _get(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def _list(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _delete(self, namespace: str, name: str) -> None:
        raise NotImplementedError

    def _describe(self, objs: list[dict[str, Any]]) -> list[DestinationJob]:
        raise NotImplementedError

    def pool_namer(self) -> Callable[..., str]:
        """How GPU pools are named here (Kueue: its ResourceFlavors; Volcano: the product)."""
        raise NotImplementedError

    def queue_stats(self) -> QueueStats:
        raise NotImplementedError

    def node_topology(self, nodes: list[dict[str, Any]]) -> NodeLevels:
        """Each node's topology levels, as the queueing layer describes them (none here)."""
        return {}

    def pools_and_levels(self, nodes: list[dict[str, Any]]) -> tuple[Callable[..., str], NodeLevels]:
        """``pool_namer`` and ``node_topology`` for one inventory read (a backend whose two
        read the same objects reads them once)."""
        return self.pool_namer(), self.node_topology(nodes)

    def local_limits(self) -> LocalLimits:
        """What the queueing layer admits (ClusterQueue quota, Queue capability)."""
        return LocalLimits()

    def inventory(self) -> InventorySnapshot:
        taken_at = now_utc()
        nodes = inv.read_nodes(self.kube, self.settings)
        pods = inv.read_gpu_pods(self.kube)
        namer, topology = self.pools_and_levels(nodes)
        pools = inv.build_pools(nodes, pods, self.settings, self.kind, namer, topology=topology)
        return InventorySnapshot(
            cluster=self.cluster,
            taken_at=taken_at,
            pools=tuple(pools),
            queue=self.queue_stats(),
            limits=self.local_limits(),
        )

    def active_jobs(self) -> list[DestinationJob]:
        raise NotImplementedError

    def usage(self, since: datetime) -> Iterator[UsageRecord]:
        raise NotImplementedError

    # ---- the shared contract --------------------------------------------------------
    def namespace_for(self, identity: ProjectIdentity) -> str:
        return identity.k8s_namespace or self.settings.default_namespace

    def queue_for(self, identity: ProjectIdentity) -> str:
        return identity.queue or self.settings.default_queue

    def submit(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> str:
        body = self.build_manifest(spec, workload_id, identity)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            self._create(namespace, body, impersonation_headers(identity))
        except KubeRejected as exc:
            if exc.status != 409:
                raise
            return self._adopt(namespace, name, workload_id, exc)
        return f"{namespace}/{name}"

    def _adopt(self, namespace: str, name: str, workload_id: str, exc: KubeRejected) -> str:
        """A 409: the object of an earlier, unanswered submit, or a stranger's."""
        existing = self._get(namespace, name)
        if existing is None:
            # It was there a moment ago and is gone (being deleted): try again later.
            raise Unavailable(f"{namespace}/{name} conflicted but is gone; retry") from exc
        owner = workload_of(existing)
        if owner != workload_id:
            raise Rejected(f"{namespace}/{name} already exists for workload {owner!r}", raw=exc.raw) from exc
        return f"{namespace}/{name}"

    def find(self, workload_id: str) -> DestinationJob | None:
        objs = self._list(f"{WORKLOAD_LABEL}={label_value(workload_id)}")
        # The label may be a shortened hash; the annotation holds the exact id.
        obj = first(o for o in objs if workload_of(o) == workload_id)
        return self._describe([obj])[0] if obj else None

    def status(self, job_ids: Sequence[str]) -> dict[str, DestinationJob]:
        objs = []
        for job_id in dict.fromkeys(job_ids):
            obj = self._get(*split_ref(job_id, self.settings.default_namespace))
            if obj is not None:
                objs.append(obj)
        found = {job.job_id: job for job in self._describe(objs)}
        for obj in objs:  # how each ended job ended, from its pods
            job = found.get(job_ref(obj))
            if job is not None and job.state.ended:
                found[job.job_id] = replace(job, outcome=self._outcome(obj))
        return found

    def _pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self.kube.items(
            self.kube.core().list_namespaced_pod, namespace, label_selector=f"{self.pod_label}={name}"
        )

    def _outcome(self, obj: dict[str, Any]) -> JobOutcome:
        meta = obj.get("metadata") or {}
        try:
            pods_now = self._pods(meta.get("namespace", ""), meta.get("name", ""))
        except Unavailable:
            pods_now = []  # the job's own word still says how it ended
        return pods.job_outcome(pods_now, pods.end_word(obj))

    def logs(
        self, job_id: str, *, worker: str = "", offset: int | None = None, limit: int = 200, tail: int | None = None
    ) -> LogPage:
        """A worker's pod log: one per worker, as the pods are."""
        namespace, name = split_ref(job_id, self.settings.default_namespace)
        return pods.read_log(
            self.kube, namespace, self._pods(namespace, name), worker=worker, offset=offset, limit=limit, tail=tail
        )

    def cancel(self, job_id: str) -> bool:
        """Foreground delete, then confirm by a follow-up read that answers 404.

        False means "asked, not yet gone" (pods still terminating): call again.
        """
        namespace, name = split_ref(job_id, self.settings.default_namespace)
        self._delete(namespace, name)
        return self._get(namespace, name) is None

    def server_version(self) -> str:
        return f"Kubernetes {self.kube.version()}"

    def close(self) -> None:
        self.kube.close()


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def seconds_between(start: datetime, end: datetime | None) -> int:
    return max(0, int(((end or now_utc()) - start).total_seconds()))


def note_deleting(obj: dict[str, Any], job: DestinationJob) -> DestinationJob:
    """A cancel in progress (Foreground delete waiting for pods) is said, not hidden."""
    if not (obj.get("metadata") or {}).get("deletionTimestamp"):
        return job
    return replace(job, raw_reason=f"{job.raw_reason} (deletion in progress)".strip())
