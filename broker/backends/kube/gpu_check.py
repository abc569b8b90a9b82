"""The pre-flight GPU check (``broker.preflight``) on Kubernetes: an init container of its own."""

from __future__ import annotations

from typing import Any, Mapping

from broker import preflight
from broker.spec import WorkloadSpec


def gpu_check_container(spec: WorkloadSpec, worker: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pre-flight GPU check (``broker.preflight``) as an init container with the worker's
    image and GPUs: the worker's rank is the Job's completion index or Volcano's task index,
    its node the one the pod is bound to. None when the spec asks no check."""
    rank, node = "${JOB_COMPLETION_INDEX:-${VK_TASK_INDEX:-0}}", "${GPUBROKER_NODE}"
    check = preflight.prelude(spec, rank=rank, node=node)
    if not check:
        return None
    env = [*worker["env"], {"name": "GPUBROKER_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    return {
        "name": preflight.INIT_CONTAINER,
        "image": worker["image"],
        "command": ["/bin/sh", "-c", check + "exit 0"],
        "env": env,
        "resources": worker["resources"],
    }
