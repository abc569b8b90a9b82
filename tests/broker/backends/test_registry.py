"""The registry is where the broker hands a backend what it needs: the GPU classes of the
policy in force, never a policy file the backend reads itself."""
from __future__ import annotations

import pytest
from django.test import override_settings

from broker.backends.registry import backend_for
from broker.fleet_file import DEMO_FLEET_PATH
from broker.services.fleet.policy import policy_override
from tests.factories import ClusterFactory

DEFAULT_POLICY = DEMO_FLEET_PATH.parents[1] / "policy" / "default.yaml"


def _policy_with_class(name: str, model: str) -> str:
    text = DEFAULT_POLICY.read_text()
    return text.replace("gpu_classes:\n", f"gpu_classes:\n  {name}:\n    models: [{model!r}]\n", 1)


@pytest.mark.django_db
@pytest.mark.parametrize("kind, config, classes_of", [
    ("slurm", {}, lambda backend: backend.config.gpu_class_types),
    ("kueue", {"host": "https://k8s.example:6443"}, lambda backend: backend.settings.gpu_classes),
])
def test_backend_gets_gpu_classes_from_the_broker_not_the_policy_file(
        kind, config, classes_of, tmp_path, monkeypatch):
    # a policy file that says otherwise, where the factories used to look for one
    other = tmp_path / "policy.yaml"
    other.write_text(_policy_with_class("only-in-the-file", "Z100"))
    monkeypatch.setenv("GPUBROKER_POLICY_FILE", str(other))
    cluster = ClusterFactory(kind=kind, config=config)
    with override_settings(GPUBROKER_ENABLE_SLURM=True, GPUBROKER_ENABLE_KUEUE=True), \
            policy_override(_policy_with_class("only-in-force", "X900"), "registry test"):
        classes = classes_of(backend_for(cluster))
    assert classes["only-in-force"] == ("X900",)
    assert "only-in-the-file" not in classes and classes["t4"] == ("Tesla T4", "NVIDIA T4", "T4")


@pytest.mark.django_db
def test_a_cluster_config_that_names_its_classes_keeps_them():
    cluster = ClusterFactory(kind="slurm", config={"gpu_classes": {"big": ["H100"]}})
    with override_settings(GPUBROKER_ENABLE_SLURM=True):
        assert backend_for(cluster).config.gpu_class_types == {"big": ("H100",)}



@pytest.mark.django_db
@pytest.mark.parametrize("kind, config, mapping_of, own, named", [
    ("slurm", {"qos_by_priority": {"high": "urgent"}}, lambda b: b.config.qos_by_priority, "urgent", "prod-qos"),
    ("kueue", {"host": "https://k8s.example:6443", "priority_classes": {"high": "research-high"}},
     lambda b: b.settings.priority_classes, "research-high", "prod-wpc"),
    ("volcano", {"host": "https://k8s.example:6443", "priority_classes": {"high": "research-high"}},
     lambda b: b.settings.priority_classes, "research-high", "prod-pc"),
])
def test_a_fleet_priority_class_reaches_each_backend_under_its_name_there(kind, config, mapping_of, own, named):
    text = DEFAULT_POLICY.read_text().replace(
        "  production: {level: high,",
        "  production: {level: high, slurm_qos: prod-qos, kueue: prod-wpc, volcano: prod-pc,", 1)
    assert text != DEFAULT_POLICY.read_text()
    cluster = ClusterFactory(kind=kind, config=config)
    with override_settings(GPUBROKER_ENABLE_SLURM=True, GPUBROKER_ENABLE_KUEUE=True, GPUBROKER_ENABLE_VOLCANO=True), \
            policy_override(text, "registry test"):
        mapping = mapping_of(backend_for(cluster))
    assert mapping["production"] == named and mapping["high"] == own  # the cluster's levels stay
