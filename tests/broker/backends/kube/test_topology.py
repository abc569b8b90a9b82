"""A gang that must share an interconnect domain carries it to Kubernetes' scheduler: required
pod affinity among its own workers, keyed on the domain's node label."""
from __future__ import annotations

import pytest

from broker.backends.base import ProjectIdentity, Unavailable
from broker.backends.kube import BackendSettings, KubeConfig, KueueBackend, VolcanoBackend
from broker.backends.kube.factory import backend_settings
from broker.backends.kube.inventory import node_entries
from broker.spec import WorkloadSpec

IDENT = ProjectIdentity(tenant="t", project="p", k8s_namespace="team")


def spec(**kw) -> WorkloadSpec:
    base = dict(project="p", name="train", command="run", gpus_per_worker=4, workers=2, gpu_models=("A100",))
    return WorkloadSpec(**{**base, **kw})


def _pod(backend, s: WorkloadSpec) -> tuple[dict, dict]:
    body = backend.build_manifest(s, "wl-1", IDENT)
    template = body["spec"]["template"] if "template" in body["spec"] else body["spec"]["tasks"][0]["template"]
    return template, template["spec"]


def test_kueue_and_volcano_gangs_keep_their_workers_in_one_domain():
    settings = BackendSettings(interconnect_label="gpubroker.io/rack", interconnect_affinity=True)
    for cls in (KueueBackend, VolcanoBackend):
        template, pod = _pod(cls("c", KubeConfig(), settings), spec(same_interconnect=True))
        [term] = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "gpubroker.io/rack", cls
        # the selector matches the job's own pods, whose template carries the label
        for key, value in term["labelSelector"]["matchLabels"].items():
            assert template["metadata"]["labels"][key] == value, cls


def test_no_requirement_without_the_ask_a_gang_the_label_or_the_sites_word():
    kueue = KueueBackend("c", KubeConfig(), BackendSettings(interconnect_affinity=True))
    for s in (spec(), spec(workers=1, same_interconnect=True)):
        assert "podAffinity" not in _pod(kueue, s)[1].get("affinity", {})
    unlabelled = KueueBackend("c", KubeConfig(), BackendSettings(interconnect_label="", interconnect_affinity=True))
    assert "podAffinity" not in _pod(unlabelled, spec(same_interconnect=True))[1].get("affinity", {})
    # by default the site has not said that every GPU node carries the label: an unlabelled
    # node would take no worker of such a gang, though placement may have put it on one node
    default = KueueBackend("c", KubeConfig(), BackendSettings())
    assert "podAffinity" not in _pod(default, spec(same_interconnect=True))[1].get("affinity", {})


def test_where_kueue_has_topology_aware_scheduling_the_gang_asks_it_for_the_domain():
    tas = KueueBackend("c", KubeConfig(), BackendSettings(interconnect_label="gpubroker.io/rack", kueue_topology=True))
    template, _ = _pod(tas, spec(same_interconnect=True))
    assert template["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": "gpubroker.io/rack"}
    assert "annotations" not in _pod(tas, spec())[0]["metadata"]  # no ask, no annotation
    plain = KueueBackend("c", KubeConfig(), BackendSettings(interconnect_label="gpubroker.io/rack"))
    assert "annotations" not in _pod(plain, spec(same_interconnect=True))[0]["metadata"]


def test_the_topology_flags_in_a_clusters_config_must_be_true_or_false():
    assert backend_settings({"kueue_topology": True}).kueue_topology is True
    with pytest.raises(Unavailable, match="kueue_topology must be true or false"):
        backend_settings({"kueue_topology": "yes"})
    with pytest.raises(Unavailable, match="interconnect_affinity must be true or false"):
        backend_settings({"interconnect_affinity": 1})


def test_where_volcano_names_its_hypernode_tier_the_gang_carries_network_topology_hard():
    volcano = VolcanoBackend("c", KubeConfig(), BackendSettings(volcano_network_tier=1))
    body = volcano.build_manifest(spec(same_interconnect=True), "wl-1", IDENT)
    assert body["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    # no ask, a single worker, or a site without a tier: none
    for backend, s in ((volcano, spec()), (volcano, spec(workers=1, same_interconnect=True)),
                       (VolcanoBackend("c", KubeConfig(), BackendSettings()), spec(same_interconnect=True))):
        assert "networkTopology" not in backend.build_manifest(s, "wl-1", IDENT)["spec"]


def test_where_volcano_names_its_tier_a_nodes_domain_is_the_hypernode_holding_it():
    node = {"metadata": {"name": "n-0", "labels": {"nvidia.com/gpu.product": "NVIDIA-L40S",
                                                   "nvidia.com/gpu.clique": "label-domain"}},
            "status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    levels = (("tier 2", "spine"), ("tier 1", "rack-a"))
    [tiered] = node_entries(node, {}, BackendSettings(volcano_network_tier=1), "volcano", topology=levels)
    [labelled] = node_entries(node, {}, BackendSettings(), "volcano", topology=levels)
    assert (tiered.interconnect_domain, labelled.interconnect_domain) == ("rack-a", "label-domain")
    [outside] = node_entries(node, {}, BackendSettings(volcano_network_tier=3), "volcano", topology=levels)
    assert outside.interconnect_domain == ""


def test_a_required_or_preferred_level_becomes_kueues_pod_set_annotation_with_the_levels_label():
    from broker.backends.kube.topology import kueue_pod_annotations

    tas = BackendSettings(kueue_topology=True)
    labels = ("cloud.example.com/block", "cloud.example.com/rack", "kubernetes.io/hostname")
    assert kueue_pod_annotations(spec(topology_level="rack"), tas, labels) == {
        "kueue.x-k8s.io/podset-required-topology": "cloud.example.com/rack"}
    assert kueue_pod_annotations(spec(topology_level="block", topology_mode="preferred"), tas, labels) == {
        "kueue.x-k8s.io/podset-preferred-topology": "cloud.example.com/block"}
    assert kueue_pod_annotations(spec(topology_level="host"), tas, labels) == {
        "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"}
    # a level the cluster's Topology lacks, a site without TAS, a single worker: no annotation
    assert kueue_pod_annotations(spec(topology_level="host"), tas, labels[:2]) == {}
    assert kueue_pod_annotations(spec(topology_level="rack"), BackendSettings(), labels) == {}
    assert kueue_pod_annotations(spec(topology_level="rack", workers=1), tas, labels) == {}


def test_a_gang_on_one_host_asks_kubernetes_for_affinity_on_the_hostname_required_or_preferred():
    for cls in (KueueBackend, VolcanoBackend):
        backend = cls("c", KubeConfig(), BackendSettings())
        _, pod = _pod(backend, spec(topology_level="host"))
        [term] = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname", cls
        _, pod = _pod(backend, spec(topology_level="host", topology_mode="preferred"))
        [soft] = pod["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert soft["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname", cls
        assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAffinity"]


def test_a_level_becomes_volcanos_network_topology_hard_when_required_and_soft_when_preferred():
    volcano = VolcanoBackend("c", KubeConfig(), BackendSettings())
    def network(s):
        return volcano.build_manifest(s, "wl-1", IDENT)["spec"].get("networkTopology")
    assert network(spec(topology_level="rack")) == {"mode": "hard", "highestTierAllowed": 1}
    soft = network(spec(topology_level="tier 2", topology_mode="preferred"))
    assert soft == {"mode": "soft", "highestTierAllowed": 2}
    # levels that name no tier: Volcano is not told (placement sends no required gang there)
    assert network(spec(topology_level="block")) is None
    assert network(spec(topology_level="cloud.example.com/rack")) is None
