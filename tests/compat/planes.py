"""The control planes the compatibility suite runs on, each behind the same few questions the
tests ask: register the cluster for the broker, give a project an account (limited or not),
say which GPUs a job holds on which node, start and end a higher-priority local job.

Slurm: the test cluster of scripts/slurm-cluster, whichever version is up (22.05, 24.11.5,
26.05.5), through the broker's Slurm backend on its command transport (the REST transport
has a test of its own per version: test_every_offered_rest_api_version_...).
Kueue: the main cluster of scripts/k8s-cluster (kwok nodes, real Kueue), with queues of the
suite's own (compat_objects) so that no other test's queue changes; the `k8s` lane runs it
with kueue.x-k8s.io/v1beta1 served and again with it unserved.
Volcano: the same cluster's Volcano (its L40S kwok nodes, 3 x 2 GPUs), with queues of the
suite's own (volcano_compat_objects). Test tooling only: the product knows nothing of it."""

from __future__ import annotations

import re
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.models import Cluster
from tests.broker.backends.kube.real import cluster as kube
from tests.broker.backends.slurm.support import JOBDIR, sh

# each plane's parameter, with the marker of the CI lane that has it (the Volcano case also
# `volcano`, which selects the Volcano tests alone)
PLANES = {
    "slurm": pytest.param("slurm", marks=pytest.mark.slurm),
    "kueue": pytest.param("kueue", marks=pytest.mark.k8s),
    "volcano": pytest.param("volcano", marks=[pytest.mark.k8s, pytest.mark.volcano]),
}


@dataclass
class SlurmPlane:
    """scripts/slurm-cluster's cluster: two nodes of 8 GPUs, account ``research`` limited to 4
    GPUs (GrpTRES), QoS ``compat-urgent`` that preempts normal-QoS jobs (PreemptMode=CANCEL)."""

    env: dict[str, str]
    transport: str = "cli"
    name: str = "slurm"
    gpus_per_node: int = 8
    nodes: int = 2
    limited_gpus: int = 4  # GrpTRES of the limited account
    limit_words: tuple[str, ...] = ("GrpTRES=gres/gpu=4", "at most 4 GPUs")  # the reason names the limit
    preempted_words: str = "(PREEMPTED)"  # the job's end as Slurm words it
    # PreemptMode=CANCEL ends the job PREEMPTED and does not queue it again: the broker places
    # the workload again, for a new job
    preempted_state: str = "waiting"
    requeues: bool = False
    gpu_class: str = "a100-80gb"

    def register(self, settings) -> Cluster:
        settings.GPUBROKER_ENABLE_SLURM = True
        settings.GPUBROKER_ENABLE_SIMULATOR = False
        config = {"transport": self.transport, "partition": "gpu", "submit_user": "root", "image_pull_s": 0,
                  "workdir": str(JOBDIR)}
        return Cluster.objects.create(name=f"compat-{self.name}", kind="slurm", region="eu-west", location="onprem",
                                      config=config)

    def project_fields(self, *, limited: bool) -> dict[str, str]:
        # a fresh account each run (the broker creates it), or the one with a GPU limit
        return {"slurm_account": self.env.get("SLURM_CI_LIMITED_ACCOUNT", "research") if limited
                else "cp" + uuid.uuid4().hex[:8]}

    def gpus_per_worker(self, job_id: str) -> list[int]:
        """The GPUs each worker holds, a worker a node (the broker asks one per node), from
        `scontrol -d show job` (its GRES per node)."""
        out = sh("scontrol", "-d", "show", "job", job_id)
        held: dict[str, int] = {}
        for nodes, gres in re.findall(r"^\s*Nodes=(\S+) CPU_IDs=.*?GRES=(\S+)", out, re.M):
            count = sum(int(n) for n in re.findall(r"gpu(?::[^:(]+)?:(\d+)", gres))
            for node in sh("scontrol", "show", "hostnames", nodes).split():
                held[node] = held.get(node, 0) + count
        return sorted(held.values())

    def start_urgent_local_job(self, gpus_per_node: int) -> str:
        """A job submitted at the cluster, not through the broker, in the QoS that preempts."""
        out = sh("sbatch", "--parsable", "--qos", self.env.get("SLURM_CI_URGENT_QOS", "compat-urgent"),
                 "-A", self.env.get("SLURM_CI_ACCOUNT", "general"), "-p", "gpu", "-N", str(self.nodes),
                 f"--gres=gpu:{gpus_per_node}", "-t", "5", "-J", "compat-urgent", "-o", str(JOBDIR / "%j.out"),
                 "--wrap", "sleep 300")
        return out.strip().split(";")[0]

    def local_job_state(self, job_id: str) -> str:
        """squeue's state of the job; "" once squeue lists it no more (it answers an error)."""
        return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                              timeout=30).stdout.strip()

    def end_local_job(self, job_id: str) -> None:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30)

    def is_gone(self, job_id: str) -> bool:
        """The job runs no more at the cluster (squeue lists it no longer, or ended)."""
        return self.local_job_state(job_id) in ("", "CANCELLED", "COMPLETED", "FAILED", "PREEMPTED")

    def start_recorded(self, job_id: str) -> bool:
        """Whether slurmdbd holds the running job's start. A run preempted before it does stays
        recorded without one (22.05, CI 2026-12-07: the first run `Start=Unknown`,
        `ElapsedRaw=0`, though squeue had shown it running), so it is charged nothing."""
        out = sh("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "Start")
        return any(start not in ("Unknown", "None") for start in out.split())


@dataclass
class SlurmRequeuePlane(SlurmPlane):
    """The same cluster, the broker's jobs in QoS ``compat-requeue`` (PreemptMode=REQUEUE,
    preempted by ``compat-urgent`` too): Slurm queues a preempted job again under its job id,
    and the broker follows that job; sacct keeps one record per run (``--duplicates``), which
    the broker charges as one entry. Only the preemption test runs on it."""

    name: str = "slurm-requeue"
    preempted_words: str = "queued again there"
    preempted_state: str = "queued"
    requeues: bool = True

    def register(self, settings) -> Cluster:
        cluster = super().register(settings)
        cluster.config = {**cluster.config, "default_qos": "compat-requeue"}
        cluster.save(update_fields=["config"])
        return cluster

    def project_fields(self, *, limited: bool) -> dict[str, str]:
        # root's association with "general" may use the QoS (a fresh account's would not)
        return {"slurm_account": self.env.get("SLURM_CI_ACCOUNT", "general")}


# the preemption test's planes: every plane, and Slurm once more with PreemptMode=REQUEUE
PREEMPTION_PLANES = [*PLANES.values(), pytest.param("slurm-requeue", marks=pytest.mark.slurm)]

COMPAT_QUEUE, LIMITED_QUEUE = "compat", "compat-limited"


def compat_objects() -> list[dict[str, Any]]:
    """The suite's own Kueue queues on the a100 kwok nodes (2 x 4 GPUs): ClusterQueue
    compat-cq (8 GPUs, preempts lower priorities within itself) behind LocalQueue compat, and
    compat-limited-cq (4 GPUs) behind LocalQueue compat-limited."""
    def queue(name: str, gpus: int, preemption: str) -> dict[str, Any]:
        cq = kube.cluster_queue(name, a100=gpus, h100=0, mig=0)
        cq["spec"]["preemption"] = {"withinClusterQueue": preemption}
        return cq

    return [kube.namespace(), queue("compat-cq", 8, "LowerPriority"), queue("compat-limited-cq", 4, "Never"),
            kube.local_queue(COMPAT_QUEUE, "compat-cq"), kube.local_queue(LIMITED_QUEUE, "compat-limited-cq")]


def remove_compat_objects(api: client.ApiClient) -> None:
    """The suite's queues gone again (LocalQueues first: a ClusterQueue in use is kept)."""
    custom = client.CustomObjectsApi(api)
    for doc in reversed(compat_objects()[1:]):
        group, version = doc["apiVersion"].split("/")
        meta = doc["metadata"]
        try:
            if doc["kind"] == "LocalQueue":
                custom.delete_namespaced_custom_object(group, version, meta["namespace"], "localqueues", meta["name"])
            else:
                custom.delete_cluster_custom_object(group, version, "clusterqueues", meta["name"])
        except ApiException as exc:
            if exc.status != 404:
                raise


class _KubePlane:
    """What the Kueue and Volcano planes share: the suite's namespace, the queue of the
    limited project, a job's pods by the label its controller gives them."""

    api: client.ApiClient
    limited_queue: ClassVar[str]
    pod_label: ClassVar[str]

    def project_fields(self, *, limited: bool) -> dict[str, str]:
        return {"k8s_namespace": kube.NAMESPACE, "k8s_queue": self.limited_queue if limited else ""}

    def _pods(self, job_id: str) -> list[Any]:
        namespace, name = job_id.split("/", 1)
        return client.CoreV1Api(self.api).list_namespaced_pod(
            namespace, label_selector=f"{self.pod_label}={name}").items

    def _bound(self, job_id: str) -> list[Any]:
        return [p for p in self._pods(job_id) if p.spec.node_name]

    def gpus_per_worker(self, job_id: str) -> list[int]:
        """The GPUs each of the job's pods holds on the node it was bound to."""
        return _gpus(self._bound(job_id))

    def start_recorded(self, job_id: str) -> bool:
        """Always: the broker charges from the Workload's or PodGroup's own transition times,
        which the API server holds once the job runs."""
        return True


@dataclass
class KueuePlane(_KubePlane):
    """CI's Kueue: the broker's jobs in LocalQueue compat (a ClusterQueue of 8 A100s that
    preempts lower priorities), the limited project's in compat-limited (4 GPUs); a local
    Job in WorkloadPriorityClass gpubroker-high preempts. Kueue evicts and queues the
    preempted job again: the broker follows the same job."""

    env: dict[str, str]
    api: client.ApiClient
    name: str = "kueue"
    gpus_per_node: int = 4
    nodes: int = 2
    limited_gpus: int = 4
    limit_words: tuple[str, ...] = ("ClusterQueue compat-limited-cq", "at most 4 GPUs")
    preempted_words: str = "Preempted to accommodate a workload"  # Kueue's Evicted condition
    preempted_state: str = "queued"
    requeues: bool = True
    gpu_class: str = "a100-80gb"
    limited_queue: ClassVar[str] = LIMITED_QUEUE
    pod_label: ClassVar[str] = "batch.kubernetes.io/job-name"

    def register(self, settings) -> Cluster:
        settings.GPUBROKER_ENABLE_KUEUE = True
        settings.GPUBROKER_ENABLE_SIMULATOR = False
        config = {"kubeconfig": self.env["K8S_MAIN_KUBECONFIG"], "queue": COMPAT_QUEUE, "namespace": kube.NAMESPACE,
                  "model_names": {kube.A100: "NVIDIA A100-SXM4-80GB", kube.H100: "NVIDIA H100 80GB HBM3",
                                  kube.A100_40: "NVIDIA A100-SXM4-40GB"}}
        return Cluster.objects.create(name=f"compat-{self.name}", kind="kueue", region="eu-west", location="onprem",
                                      config=config)

    def start_urgent_local_job(self, gpus_per_node: int) -> str:
        """A Job created at the cluster, not through the broker, in the class that preempts."""
        name = "compat-urgent-" + uuid.uuid4().hex[:6]
        container = {"name": "main", "image": "busybox", "command": ["sleep", "300"],
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus_per_node)},
                                   "limits": {"nvidia.com/gpu": str(gpus_per_node)}}}
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": kube.NAMESPACE,
                            "labels": {"kueue.x-k8s.io/queue-name": COMPAT_QUEUE,
                                       "kueue.x-k8s.io/priority-class": "gpubroker-high"}},
               "spec": {"parallelism": self.nodes, "completions": self.nodes, "suspend": True,
                        "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}
        client.BatchV1Api(self.api).create_namespaced_job(kube.NAMESPACE, job)
        return f"{kube.NAMESPACE}/{name}"

    def local_job_state(self, job_id: str) -> str:
        """RUNNING once its pods run; PENDING while Kueue holds it; "" once it is gone."""
        namespace, name = job_id.split("/", 1)
        try:
            job = client.BatchV1Api(self.api).read_namespaced_job(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return ""
            raise
        if job.metadata.deletion_timestamp or any(
                c.type in ("Complete", "Failed") and c.status == "True" for c in job.status.conditions or []):
            return "ENDED"
        running = [p for p in self._pods(job_id) if p.status.phase == "Running"]
        return "RUNNING" if not job.spec.suspend and len(running) >= self.nodes else "PENDING"

    def end_local_job(self, job_id: str) -> None:
        namespace, name = job_id.split("/", 1)
        try:
            client.BatchV1Api(self.api).delete_namespaced_job(name, namespace, propagation_policy="Foreground")
        except ApiException as exc:
            if exc.status != 404:
                raise

    def is_gone(self, job_id: str) -> bool:
        """The job runs no more at the cluster (deleted, or ended)."""
        return self.local_job_state(job_id) in ("", "ENDED")


VOLCANO_QUEUE, VOLCANO_LIMITED_QUEUE = "compat-vc", "compat-vc-limited"


URGENT_CLASS = "compat-vc-urgent"
BLOCKER = "compat-blocker-"


def volcano_compat_objects() -> list[dict[str, Any]]:
    """The suite's Volcano queues: compat-vc (no capability) and compat-vc-limited (2 GPUs),
    on the L40S kwok nodes of the `volcano` pool (3 x 2 GPUs); the PriorityClass of the
    local job that preempts."""
    urgent = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": URGENT_CLASS},
              "value": 1000, "description": "gpubroker compatibility suite: a local job that preempts"}
    return [kube.namespace(), *kube.volcano_nodes(3), kube.volcano_queue(VOLCANO_QUEUE),
            kube.volcano_queue(VOLCANO_LIMITED_QUEUE, gpus=2), urgent]


def remove_blockers(api: client.ApiClient, timeout_s: float = 60) -> None:
    """The pods that filled the free L40S nodes gone (delete_jobs waits for an empty namespace)."""
    core = client.CoreV1Api(api)

    def blockers() -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(kube.NAMESPACE).items
                if p.metadata.name.startswith(BLOCKER)]

    for name in blockers():
        core.delete_namespaced_pod(name, kube.NAMESPACE, grace_period_seconds=0)
    kube.wait_for(lambda: not blockers(), timeout_s, what="the blocking pods gone")


def remove_volcano_compat_objects(api: client.ApiClient) -> None:
    """The suite's queues gone again (the Volcano tests read the cluster's queues)."""
    custom = client.CustomObjectsApi(api)
    for name in (VOLCANO_QUEUE, VOLCANO_LIMITED_QUEUE):
        try:
            custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)
        except ApiException as exc:
            if exc.status != 404:
                raise


@dataclass
class VolcanoPlane(_KubePlane):
    """CI's Volcano: the broker's Volcano Jobs in queue compat-vc on the L40S kwok nodes
    (a GPU class of the suite's own, l40s), the limited project's in compat-vc-limited
    (capability 2 GPUs). The test cluster's scheduler has Volcano's preempt action on
    (scripts/k8s-cluster): a local vcjob in PriorityClass compat-vc-urgent, in the same queue,
    evicts a pod of the broker's job, which Volcano then restarts in its queue (our PodEvicted
    policy, RestartJob): the broker follows the same job."""

    env: dict[str, str]
    api: client.ApiClient
    name: str = "volcano"
    gpus_per_node: int = 2
    nodes: int = 2
    limited_gpus: int = 2
    limit_words: tuple[str, ...] = ("Volcano queue compat-vc-limited", "at most 2 GPUs")
    gpu_class: str = "l40s"
    preempted_words: str = "Pod is evicted, because of preempt"  # Volcano's Evict event on the pod
    preempted_state: str = "queued"
    requeues: bool = True
    limited_queue: ClassVar[str] = VOLCANO_LIMITED_QUEUE
    pod_label: ClassVar[str] = "volcano.sh/job-name"

    def register(self, settings) -> Cluster:
        settings.GPUBROKER_ENABLE_VOLCANO = True
        settings.GPUBROKER_ENABLE_SIMULATOR = False
        settings.GPUBROKER_POLICY_FILE = self._policy(settings.GPUBROKER_POLICY_FILE)
        config = {"kubeconfig": self.env["K8S_MAIN_KUBECONFIG"], "queue": VOLCANO_QUEUE, "namespace": kube.NAMESPACE,
                  "node_selector": "gpubroker.test/pool=volcano", "model_names": {kube.L40S: "NVIDIA L40S"}}
        return Cluster.objects.create(name=f"compat-{self.name}", kind="volcano", region="eu-west",
                                      location="onprem", config=config)

    def _policy(self, default: Path) -> Path:
        """The policy with a class for the L40S nodes, which the suite's tenant may use (read
        when the test's database seeds its first policy release)."""
        doc = yaml.safe_load(Path(default).read_text())
        doc["gpu_classes"][self.gpu_class] = {"models": ["NVIDIA L40S", "L40S"], "min_memory_gb": 44}
        doc["tenants"]["physics"]["gpu_classes"].append(self.gpu_class)
        path = Path(tempfile.mkdtemp(prefix="compat-policy-")) / "policy.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path

    def gpus_per_worker(self, job_id: str) -> list[int]:
        """The GPUs each of the job's pods holds, on the L40S nodes only."""
        pods = self._bound(job_id)
        assert all(p.spec.node_name.startswith("vc-") for p in pods), [p.spec.node_name for p in pods]
        return _gpus(pods)

    def _phase(self, job_id: str) -> str | None:
        """The vcjob's phase ("" before it has one); None once it is gone."""
        namespace, name = job_id.split("/", 1)
        try:
            job = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
                "batch.volcano.sh", "v1alpha1", namespace, "jobs", name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return ((job.get("status") or {}).get("state") or {}).get("phase", "")

    def is_gone(self, job_id: str) -> bool:
        """Volcano ended the job (aborted, terminated, ...) or it was deleted, and none of its
        pods runs."""
        phase = self._phase(job_id)
        if phase is None:
            return True
        return phase in ("Aborting", "Aborted", "Terminating", "Terminated", "Completed", "Failed") and not any(
            p.status.phase == "Running" and not p.metadata.deletion_timestamp for p in self._pods(job_id))

    def start_urgent_local_job(self, gpus_per_node: int) -> str:
        """A vcjob created at the cluster, not through the broker, in the class that preempts:
        one pod of a whole node's GPUs. The L40S nodes the broker's job left free are filled
        first (pods bound to them directly), so it can start only by preemption."""
        core = client.CoreV1Api(self.api)
        busy = {p.spec.node_name for p in core.list_namespaced_pod(kube.NAMESPACE).items if p.spec.node_name}
        for node in (n["metadata"]["name"] for n in kube.volcano_nodes(3)):
            if node not in busy:
                core.create_namespaced_pod(kube.NAMESPACE, {
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": BLOCKER + node},
                    "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [_container(gpus_per_node)]}})
        name = "compat-urgent-" + uuid.uuid4().hex[:6]
        task = {"name": "main", "replicas": 1, "template": {"spec": {
            "restartPolicy": "Never", "nodeSelector": {"gpubroker.test/pool": "volcano"},
            "containers": [_container(gpus_per_node)]}}}
        job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
               "metadata": {"name": name, "namespace": kube.NAMESPACE},
               "spec": {"schedulerName": "volcano", "queue": VOLCANO_QUEUE, "minAvailable": 1,
                        "priorityClassName": URGENT_CLASS, "tasks": [task]}}
        client.CustomObjectsApi(self.api).create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", kube.NAMESPACE, "jobs", job)
        return f"{kube.NAMESPACE}/{name}"

    def local_job_state(self, job_id: str) -> str:
        """RUNNING once Volcano runs it; "" once it is gone; PENDING or ENDED otherwise."""
        phase = self._phase(job_id)
        return "" if phase is None else {"Running": "RUNNING", "Pending": "PENDING", "": "PENDING"}.get(phase, "ENDED")

    def end_local_job(self, job_id: str) -> None:
        """The local job deleted, and the pods that filled the free nodes with it."""
        namespace, name = job_id.split("/", 1)
        try:
            client.CustomObjectsApi(self.api).delete_namespaced_custom_object(
                "batch.volcano.sh", "v1alpha1", namespace, "jobs", name, propagation_policy="Foreground")
        except ApiException as exc:
            if exc.status != 404:
                raise
        remove_blockers(self.api)


def _gpus(pods: list[Any]) -> list[int]:
    """The GPUs each pod asked for, sorted."""
    return sorted(int((p.spec.containers[0].resources.requests or {}).get("nvidia.com/gpu", 0)) for p in pods)


def _container(gpus: int) -> dict[str, Any]:
    return {"name": "main", "image": "busybox", "command": ["sleep", "300"],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                          "limits": {"nvidia.com/gpu": str(gpus)}}}
