"""The dispatcher's reading of manager Workloads, against Workloads captured from the real
MultiKueue manager (data/real/; the dispatcher-mode capture comes from the manager that
.ci/setup.d/k8s-mkd.sh starts, whose Kueue waits for our nominations)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.backends.kube.dispatcher import (
    DATA_LOCATION_ANNOTATION,
    DATA_SIZE_ANNOTATION,
    parse_workload,
)

REAL = Path(__file__).parent / "data" / "real"
PRODUCT = "NVIDIA-A100-SXM4-80GB"


def captured(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())


def test_a_workload_waiting_for_our_nomination_is_nominable_with_its_pod_set_ask():
    obj = captured("multikueue-dispatcher-workload-pending")
    wl = parse_workload(obj, {"mkd-check"})
    assert wl.ref == f"mkd/{obj['metadata']['name']}" and wl.queue_key == "mkd/default"
    assert wl.uid == obj["metadata"]["uid"] and wl.resource_version
    assert (wl.quota_reserved, wl.check_state, wl.nominated, wl.cluster_name) == (True, "Pending", (), "")
    assert wl.nominable and wl.gpus == 4
    (ask,) = wl.pod_sets
    assert (ask.count, ask.gpus_per_pod, ask.gpu_product, ask.mig_profile) == (2, 2, PRODUCT, "")
    assert ask.tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists"},)
    assert wl.job_name == "captured" and wl.cluster_queue == "mkd-cq"


def test_the_jobs_data_annotations_reach_the_record_through_the_owner_uid():
    obj = captured("multikueue-dispatcher-workload-pending")
    job_uid = obj["metadata"]["ownerReferences"][0]["uid"]
    notes = {job_uid: {DATA_LOCATION_ANNOTATION: "lattice-ds", DATA_SIZE_ANNOTATION: "2000"}}
    wl = parse_workload(obj, {"mkd-check"}, notes)
    assert (wl.data_location, wl.data_size_gb) == ("lattice-ds", 2000.0)
    odd = parse_workload(obj, {"mkd-check"}, {job_uid: {DATA_SIZE_ANNOTATION: "lots"}})
    assert odd.data_size_gb == 0.0


def test_a_workload_without_our_admission_check_is_not_nominable():
    wl = parse_workload(captured("multikueue-dispatcher-workload-pending"), {"some-other-check"})
    assert wl.check_state == "" and not wl.nominable


def test_an_admitted_workload_names_its_worker_and_is_no_longer_nominable():
    wl = parse_workload(captured("multikueue-manager-workload-admitted"), {"mk-check"})
    assert wl.cluster_name == "worker-main" and wl.admitted_at is not None
    assert not wl.nominable and not wl.finished
