"""Building backends from a Cluster row's config, and class-only specs."""
from __future__ import annotations

import pytest

from broker.backends.base import JobState, Unavailable
from broker.backends.kube import KueueBackend, MultiKueueBackend, VolcanoBackend
from broker.backends.kube.factory import kube_backend_from_config
from broker.fleet_file import DEMO_FLEET_PATH
from broker.placement.policy_loader import load_policy_file


def test_builds_each_kind_with_timeouts_and_token():
    config = {"host": "https://k8s.example:6443", "namespace": "batch", "queue": "gpu",
              "priority_classes": {"high": "urgent"}, "tolerated_taints": ["gpu"]}
    kueue = kube_backend_from_config("kueue", "c1", config, token="s3cret", timeout_s=7,
                                     gpu_classes={"a100-80gb": ["A100"]})
    assert isinstance(kueue, KueueBackend) and kueue.cluster == "c1"
    assert kueue.kube.config.token == "s3cret" and kueue.kube.timeout == (5.0, 7)
    assert kueue.settings.default_namespace == "batch" and kueue.settings.default_queue == "gpu"
    assert kueue.settings.tolerated_taints == ("gpu",)
    assert kueue.settings.gpu_classes == {"a100-80gb": ("A100",)}  # the broker's (registry: the policy's)
    assert isinstance(kube_backend_from_config("volcano", "c2", {}), VolcanoBackend)
    mk = kube_backend_from_config("multikueue", "c3", {
        "kubeconfig": "/etc/mgr", "workers": {"w1": {"kubeconfig": "/etc/w1", "context": "w1"}},
        "multikueue_config": "mk"})
    assert isinstance(mk, MultiKueueBackend) and mk.workers["w1"].config.context == "w1"


def test_bad_config_is_unavailable_with_the_key():
    with pytest.raises(Unavailable, match="hots"):
        kube_backend_from_config("kueue", "c1", {"hots": "x"})
    with pytest.raises(Unavailable, match="not a Kubernetes backend"):
        kube_backend_from_config("slurm", "c1", {})


@pytest.mark.parametrize("tier", ["1", -1, 1.5, True])
def test_a_network_tier_that_is_no_whole_number_is_refused_naming_the_key(tier):
    with pytest.raises(Unavailable, match="volcano_network_tier must be a whole number"):
        kube_backend_from_config("volcano", "c1", {"volcano_network_tier": tier})


def test_a_network_tier_is_for_volcano_only():
    assert kube_backend_from_config("volcano", "c1", {"volcano_network_tier": 2}).settings.volcano_network_tier == 2
    with pytest.raises(Unavailable, match="volcano_network_tier is for a Volcano cluster, not kueue"):
        kube_backend_from_config("kueue", "c1", {"volcano_network_tier": 1})


def test_class_only_spec_selects_the_class_models(kueue, spec_factory, emu):
    emu.add_node("t4-a", product="Tesla-T4", gpus=4, memory_mib=15360)
    policy = load_policy_file(str(DEMO_FLEET_PATH.parents[1] / "policy" / "default.yaml"))
    classes = {name: c.models for name, c in policy.gpu_classes.items()}
    backend = kube_backend_from_config("kueue", "k8s-1", {"host": emu.url}, gpu_classes=classes)
    job_id = backend.submit(spec_factory(gpu_models=(), gpu_class="a100-80gb"), "wl-c",
                            kueue.identity)
    pod = kueue.job_objects()[0]["spec"]["template"]["spec"]
    [expr] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert "NVIDIA-A100-SXM4-80GB" in expr["values"] and "Tesla-T4" not in expr["values"]
    kueue.step()
    job = backend.status([job_id])[job_id]
    assert job.state == JobState.RUNNING and set(job.nodes) <= {"gpu-a", "gpu-b"}
