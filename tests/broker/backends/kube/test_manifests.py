"""Generated objects validate against the real CRD schemas (Kueue 0.19.2, Volcano 1.15.1)."""
from __future__ import annotations

import copy

import pytest

from broker.backends.kube import BackendSettings, KubeConfig, KueueBackend, VolcanoBackend
from broker.backends.kube.common import dns_name, label_value
from tests.broker.backends.kube.emu.emulator_seed import NAMESPACE
from tests.broker.backends.kube.emu import validation
from tests.broker.backends.kube.emu.validation import (
    CRD_DIR, ManifestError, crd_schema, manifest_errors, validate_manifest)
from broker.backends.base import ProjectIdentity
from broker.spec import WorkloadSpec

IDENTITY = ProjectIdentity(tenant="acme", project="proj", k8s_namespace=NAMESPACE, queue="gpu")
SETTINGS = BackendSettings(priority_classes={"low": "scavenger", "high": "urgent"})
BASE = dict(project="proj", name="train", command="torchrun train.py",
            gpu_models=("NVIDIA-A100-SXM4-80GB",))
VARIANTS = {
    "whole-gpus": dict(gpus_per_worker=4),
    "mig-profile": dict(mig_profile="3g.40gb", gpus_per_worker=2),
    "multi-worker": dict(gpus_per_worker=8, workers=16, same_interconnect=True),
    "priority-high": dict(priority="high"),
    "priority-low": dict(priority="low", workers=2),
    "several-models": dict(gpu_models=("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3")),
    "memory-floor": dict(gpu_models=(), gpu_class="big", min_gpu_memory_gb=80),
    "long-name": dict(name="a" * 52, image="registry.example/x:1"),
}


def _backends():
    cfg = KubeConfig(host="http://127.0.0.1:9")  # never contacted: build_manifest only
    return {"kueue": KueueBackend("c", cfg, SETTINGS), "volcano": VolcanoBackend("c", cfg, SETTINGS)}


@pytest.mark.parametrize("kind", ["kueue", "volcano"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_spec_variant_validates(kind, variant):
    spec = WorkloadSpec(**{**BASE, **VARIANTS[variant]})
    body = _backends()[kind].build_manifest(spec, "wl-01HZX9", IDENTITY)
    assert manifest_errors(body) == []
    assert len(body["metadata"]["name"]) <= 47
    assert body["metadata"]["namespace"] == NAMESPACE
    labels = body["metadata"]["labels"]
    assert labels["gpubroker.io/workload-id"] == "wl-01HZX9"
    pod = (body["spec"]["template"] if kind == "kueue" else
           body["spec"]["tasks"][0]["template"])["spec"]
    limits = pod["containers"][0]["resources"]["limits"]
    resource = f"nvidia.com/mig-{spec.mig_profile}" if spec.mig_profile else "nvidia.com/gpu"
    assert limits[resource] == str(spec.gpus_per_worker)
    if kind == "kueue":
        assert body["spec"]["parallelism"] == body["spec"]["completions"] == spec.workers
        assert labels["kueue.x-k8s.io/queue-name"] == "gpu"
    else:
        assert body["spec"]["minAvailable"] == spec.workers == body["spec"]["tasks"][0]["replicas"]
        assert body["spec"]["queue"] == "gpu"


def test_placement_terms():
    b = _backends()["kueue"]
    several = b.build_manifest(WorkloadSpec(**{**BASE, **VARIANTS["several-models"]}), "w", IDENTITY)
    pod = several["spec"]["template"]["spec"]
    [expr] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert expr["operator"] == "In" and len(expr["values"]) == 2 and "nodeSelector" not in pod
    floor = b.build_manifest(WorkloadSpec(**{**BASE, **VARIANTS["memory-floor"]}), "w", IDENTITY)
    [expr] = floor["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert expr == {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["81919"]}


def test_validator_catches_violations():
    b = _backends()
    spec = WorkloadSpec(**BASE)
    vcjob = b["volcano"].build_manifest(spec, "wl-1", IDENTITY)
    bad = copy.deepcopy(vcjob)
    bad["spec"]["minAvailable"] = "four"
    bad["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["name"] = 7
    errors = manifest_errors(bad)
    assert any(e.startswith("spec/minAvailable") for e in errors)
    assert any("containers/0/name" in e for e in errors)
    job = b["kueue"].build_manifest(spec, "wl-1", IDENTITY)
    del job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    job["spec"]["suspend"] = False
    with pytest.raises(ManifestError, match="queue-name"):
        validate_manifest(job)
    assert any("suspend" in e for e in manifest_errors(job))


def test_kueue_emulator_objects_are_crd_valid(kueue):
    kueue.submit("wl-v", gpus_per_worker=2, workers=2)
    kueue.submit("wl-w", gpus_per_worker=8, workers=2)
    kueue.step()
    for gp, obj in kueue.emu.store.all_objects():
        if gp[0] not in ("", "batch"):
            assert manifest_errors(obj) == [], (gp, obj["metadata"]["name"])


def test_volcano_emulator_objects_are_crd_valid(volcano):
    volcano.submit("wl-v", gpus_per_worker=2, workers=2)
    volcano.submit("wl-w", gpus_per_worker=8, workers=2)
    volcano.step()
    for gp, obj in volcano.emu.store.all_objects():
        if gp[0] not in ("", "batch"):
            assert manifest_errors(obj) == [], (gp, obj["metadata"]["name"])


def test_crd_schemas_come_from_the_pinned_modules_copies(monkeypatch, tmp_path):
    assert (CRD_DIR / "kueue-v0.19.2" / "kueue.x-k8s.io_workloads.yaml").exists()
    with pytest.raises(ManifestError, match="does not serve"):
        crd_schema("batch.volcano.sh", "Job", "v9")
    monkeypatch.setattr(validation, "CRD_DIR", tmp_path)
    crd_schema.cache_clear()
    try:
        with pytest.raises(ManifestError, match="not found"):
            crd_schema("scheduling.volcano.sh", "Queue", "v1beta1")
    finally:
        crd_schema.cache_clear()


def test_names_and_label_values_are_safe_and_deterministic():
    assert dns_name("wl-ABC_1", "My Job") == "wl-abc-1-my-job"
    long = dns_name("wl-" + "x" * 80, "train")
    assert len(long) == 47 and long == dns_name("wl-" + "x" * 80, "train")
    assert dns_name("wl-" + "x" * 80, "a") != dns_name("wl-" + "x" * 80, "b")
    assert dns_name("123") == "j123"
    assert label_value("wl-1") == "wl-1"
    odd = label_value("wl/ä" + "y" * 90)
    assert len(odd) <= 63 and odd == label_value("wl/ä" + "y" * 90)
