"""The pre-flight GPU check on Kubernetes: an init container with the worker's image and GPUs,
told its rank and node; a pod whose check failed says so as the job's outcome."""
from __future__ import annotations

from broker import preflight
from broker.backends.base import ProjectIdentity
from broker.backends.kube import BackendSettings, KubeConfig, KueueBackend, VolcanoBackend
from broker.backends.kube.pods import job_outcome
from broker.spec import WorkloadSpec

IDENT = ProjectIdentity(tenant="t", project="p", k8s_namespace="team")


def spec(**kw) -> WorkloadSpec:
    base = dict(project="p", name="train", command="run", gpus_per_worker=4, workers=2, gpu_models=("A100",))
    return WorkloadSpec(**{**base, **kw})


def _pod(backend, s: WorkloadSpec) -> dict:
    body = backend.build_manifest(s, "wl-1", IDENT)
    template = body["spec"]["template"] if "template" in body["spec"] else body["spec"]["tasks"][0]["template"]
    return template["spec"]


def test_each_worker_checks_its_gpus_in_an_init_container_with_the_same_gpus():
    for cls in (KueueBackend, VolcanoBackend):
        pod = _pod(cls("c", KubeConfig(), BackendSettings()), spec(gpu_check=True))
        [check] = pod["initContainers"]
        [worker] = pod["containers"]
        assert check["name"] == "gpu-check" and check["image"] == worker["image"], cls
        assert check["resources"] == worker["resources"], cls
        node = [e for e in check["env"] if e["name"] == "GPUBROKER_NODE"]
        assert node == [{"name": "GPUBROKER_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
        script = check["command"][-1]
        assert "-eq 4 ]" in script and "${JOB_COMPLETION_INDEX:-${VK_TASK_INDEX:-0}}" in script
        assert "initContainers" not in _pod(cls("c", KubeConfig(), BackendSettings()), spec()), cls


def _pod_status(index: str, node: str, check_exit: int | None) -> dict:
    init = [] if check_exit is None else [
        {"name": "gpu-check", "state": {"terminated": {"exitCode": check_exit, "reason": "Error"}}}]
    return {"metadata": {"name": f"train-{index}", "labels": {"batch.kubernetes.io/job-completion-index": index}},
            "spec": {"nodeName": node}, "status": {"initContainerStatuses": init, "containerStatuses": []}}


def test_a_pod_whose_check_failed_ends_the_job_as_a_failed_gpu_check_on_that_worker_and_node():
    pods = [_pod_status("0", "kw-a", 0), _pod_status("1", "kw-b", preflight.CHECK_FAILED_EXIT)]
    said = job_outcome(pods, "BackoffLimitExceeded")
    assert said.summary == "GPU check failed on worker 1 (node kw-b)"
    assert (said.end_reason, said.exit_code, said.worker) == ("GPU_CHECK", 86, "1")
    # an init container of another name, or another exit code, is not the check
    other = job_outcome([_pod_status("0", "kw-a", 1)], "BackoffLimitExceeded")
    assert other.end_reason != "GPU_CHECK"


def test_nodes_the_broker_holds_back_are_kept_out_by_required_node_affinity():
    for cls in (KueueBackend, VolcanoBackend):
        pod = _pod(cls("c", KubeConfig(), BackendSettings()), spec(exclude_nodes=("kw-b",)))
        [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["kw-b"]} in term["matchExpressions"]
