"""GPU inventory from Nodes and Pods, grouped into pools (shared by all kube backends).

A node can carry whole GPUs and, under the MIG "mixed" strategy, several MIG
profiles at once; each (node, partitioning) pair becomes one NodeInventory so
that a pool holds one model and one partitioning only.  Allocation comes from
the pods bound to the node, because that is what the kubelet will refuse to
overcommit whichever scheduler placed them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping

from broker.cluster_report import Levels
from broker.spec import SHARED_PARTITIONINGS
from broker.backends.base import NodeInventory, PoolInventory
from broker.backends.json_fields import Fields, Key
from broker.backends.kube.common import (
    COUNT_LABEL,
    MEMORY_LABEL,
    MIG_RESOURCE_PREFIX,
    MIG_STRATEGY_LABEL,
    PRODUCT_LABEL,
    SHARED_RESOURCE,
    SHARING_LABEL,
    SHARING_STRATEGIES,
    KubeClient,
    gpu_requests,
    is_gpu_resource,
    quantity,
)
from broker.backends.kube.settings import BackendSettings
from broker.backends.kube.shares import replicas_of
from broker.backends.kube.topology_levels import tier_level

_MIG_MEM_RE = re.compile(r"\.(\d+)gb$")
_DRAIN_TAINTS = ("NoSchedule", "NoExecute")
PoolNamer = Callable[[Mapping[str, str]], str]


def read_nodes(kube: KubeClient, settings: BackendSettings) -> list[dict[str, Any]]:
    core = kube.core()
    return kube.items(core.list_node, label_selector=settings.node_selector or None)


def read_gpu_pods(kube: KubeClient) -> list[dict[str, Any]]:
    """Pods that hold devices: bound and not terminated."""
    core = kube.core()
    pods = kube.items(core.list_pod_for_all_namespaces, field_selector="status.phase!=Succeeded,status.phase!=Failed")
    return [p for i, p in enumerate(pods) if Fields(p, (f"pods[{i}]",)).obj("spec").text("nodeName")]


def allocated_by_node(pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """(node, resource) -> devices requested by the pods bound there."""
    out: dict[tuple[str, str], int] = defaultdict(int)
    for i, raw in enumerate(pods):
        pod = Fields(raw, (f"pods[{i}]",))
        spec = pod.obj("spec")
        if pod.obj("status").value("phase") in ("Succeeded", "Failed"):
            continue
        node = spec.text("nodeName")
        for container in spec.objs("containers"):
            for name, count in gpu_requests(container.obj("resources")).items():
                out[(node, name)] += count
    return out


def _device_kind(resource: str, labels: Mapping[str, str], labels_at: tuple[Key, ...]) -> tuple[str, int, str]:
    """(partitioning, memory GB per device, product) of one GPU resource of a node.

    Shared (time-slicing or MPS replicas): partitioning ``time-slicing`` or ``mps``.

    Mixed strategy: ``nvidia.com/mig-<profile>`` resources.  Single strategy: the
    slices are ``nvidia.com/gpu`` and the product label ends in ``-MIG-<profile>``.
    """
    product = labels.get(PRODUCT_LABEL, "unknown")
    sharing = labels.get(SHARING_LABEL, "")
    if resource == SHARED_RESOURCE or (not resource.startswith(MIG_RESOURCE_PREFIX) and sharing in SHARING_STRATEGIES):
        # replicas of whole GPUs, each with the GPU's memory and none of its isolation: a pool
        # of its own, which a job asking for whole GPUs never matches (filter_partitioning)
        memory_gb = round(quantity(labels.get(MEMORY_LABEL), labels_at + (MEMORY_LABEL,)) / 1024)
        return sharing if sharing in SHARING_STRATEGIES else "shared", memory_gb, product.removesuffix("-SHARED")
    profile = resource[len(MIG_RESOURCE_PREFIX) :] if resource.startswith(MIG_RESOURCE_PREFIX) else ""
    if not profile and labels.get(MIG_STRATEGY_LABEL) == "single" and "-MIG-" in product:
        product, profile = product.split("-MIG-", 1)
    if profile:
        match = _MIG_MEM_RE.search(profile)
        return profile, int(match.group(1)) if match else 0, product
    return "whole", round(quantity(labels.get(MEMORY_LABEL), labels_at + (MEMORY_LABEL,)) / 1024), product


def _ready(node: Fields) -> Fields | None:
    return next((c for c in node.obj("status").objs("conditions") if c.value("type") == "Ready"), None)


def _healthy(node: Fields) -> bool:
    ready = _ready(node)
    return ready is not None and ready.value("status") == "True"  # never Ready: not trusted with work


def _blocking_taints(node: Fields, settings: BackendSettings) -> list[Fields]:
    """The taints that keep the broker's pods off the node."""
    return [
        t
        for t in node.obj("spec").objs("taints")
        if t.value("effect") in _DRAIN_TAINTS and t.value("key") not in settings.tolerated_taints
    ]


def _draining(node: Fields, settings: BackendSettings) -> bool:
    return bool(node.obj("spec").value("unschedulable")) or bool(_blocking_taints(node, settings))


def _health_reason(node: Fields, settings: BackendSettings, total: int, allocatable: int) -> str:
    """Why the node's GPUs of one resource take no work, in Kubernetes' words: its Ready
    condition, a cordon, a taint that keeps pods off, or GPUs the device plugin no longer
    offers (allocatable below capacity: what it reports of a GPU it finds unhealthy)."""
    words = []
    ready = _ready(node)
    if ready is None:
        words.append("never reported Ready")
    elif ready.value("status") != "True":
        detail = ": ".join(str(x) for x in (ready.value("reason"), ready.value("message")) if x)
        words.append(f"not Ready ({detail})" if detail else "not Ready")
    if node.obj("spec").value("unschedulable"):
        words.append("cordoned")
    for t in _blocking_taints(node, settings):
        value = f"={t.value('value')}" if t.value("value") else ""
        words.append(f"taint {t.value('key')}{value}:{t.value('effect')}")
    if allocatable < total:
        words.append(f"{total - allocatable} of {total} GPUs not allocatable")
    return "; ".join(words)


def node_entries(
    node: Mapping[str, Any] | Fields,
    alloc: Mapping[tuple[str, str], int],
    settings: BackendSettings,
    owner: str,
    prefix: str = "",
    topology: Levels = (),
) -> list[NodeInventory]:
    """One NodeInventory per GPU resource (whole GPUs, each MIG profile) of the node;
    ``topology``: its levels (``topology_levels``)."""
    node = node if isinstance(node, Fields) else Fields(node)
    meta, status = node.obj("metadata"), node.obj("status")
    labels, name = meta.texts("labels"), meta.text("name")
    capacity, allocatable = status.obj("capacity"), status.obj("allocatable")
    labels_at = meta.at("labels")
    out = []
    for resource in sorted(k for k in capacity.raw if is_gpu_resource(k)):
        partitioning, memory_gb, product = _device_kind(resource, labels, labels_at)
        total = quantity(capacity.value(resource), capacity.at(resource))
        if partitioning == "whole" and labels.get(COUNT_LABEL):
            # GPUs the plugin lost count of
            total = max(total, quantity(labels[COUNT_LABEL], labels_at + (COUNT_LABEL,)))
        if total <= 0:
            continue
        gpus_allocatable = quantity(allocatable.value(resource), allocatable.at(resource))
        out.append(
            NodeInventory(
                name=prefix + name,
                gpu_model=settings.model_names.get(product, product),
                gpu_memory_gb=memory_gb,
                gpus_total=total,
                gpus_allocatable=gpus_allocatable,
                gpus_allocated=alloc.get((name, resource), 0),
                partitioning=partitioning,
                units_per_gpu=replicas_of(labels) if partitioning in SHARED_PARTITIONINGS else 1,
                healthy=_healthy(node),
                draining=_draining(node, settings),
                health_reason=_health_reason(node, settings, total, gpus_allocatable),
                interconnect_domain=_interconnect_domain(labels, topology, settings),
                owner=owner,
                topology=topology,
            )
        )
    return out


def _interconnect_domain(labels: Mapping[str, str], topology: Levels, settings: BackendSettings) -> str:
    """The node's label, or where a Volcano site names its HyperNode tier, the tier's
    HyperNode holding the node ("" where none does)."""
    if settings.volcano_network_tier:
        return dict(topology).get(tier_level(settings.volcano_network_tier), "")
    return labels.get(settings.interconnect_label, "")


def flavor_namer(flavors: Iterable[Mapping[str, Any]]) -> PoolNamer:
    """Kueue: the most specific ResourceFlavor whose nodeLabels the node carries."""
    read = [Fields(f, (f"resourceflavors[{i}]",)) for i, f in enumerate(flavors)]
    specs = [(f.obj("metadata").text("name"), f.obj("spec").texts("nodeLabels")) for f in read]
    specs.sort(key=lambda s: -len(s[1]))

    def name(labels: Mapping[str, str]) -> str:
        for flavor, wanted in specs:
            if wanted and all(labels.get(k) == v for k, v in wanted.items()):
                return flavor
        return labels.get(PRODUCT_LABEL, "gpu")

    return name


def product_namer(labels: Mapping[str, str]) -> str:
    return labels.get(PRODUCT_LABEL, "gpu")


def build_pools(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    settings: BackendSettings,
    owner: str,
    namer: PoolNamer,
    prefix: str = "",
    topology: Mapping[str, Levels] | None = None,
) -> list[PoolInventory]:
    """Group node entries into pools named "<base>[/<mig profile>][/<model>]";
    ``topology``: each node's levels, by node name."""
    alloc = allocated_by_node(pods)
    groups: dict[tuple[str, str, str], list[NodeInventory]] = defaultdict(list)
    for i, raw in enumerate(nodes):
        node = Fields(raw, (f"nodes[{i}]",))
        base = prefix + namer(node.obj("metadata").texts("labels"))
        levels = (topology or {}).get(node.obj("metadata").text("name"), ())
        for entry in node_entries(node, alloc, settings, owner, prefix, levels):
            groups[(base, entry.partitioning, entry.gpu_model)].append(entry)
    models_per_base: dict[tuple[str, str], set[str]] = defaultdict(set)
    for base, part, model in groups:
        models_per_base[(base, part)].add(model)
    pools = []
    for (base, part, model), entries in sorted(groups.items()):
        name = base + ("" if part == "whole" else f"/{part}")
        if len(models_per_base[(base, part)]) > 1:
            name += f"/{model}"  # one pool, one model: a flavor without a product label
        pools.append(
            PoolInventory(
                name=name,
                gpu_model=model,
                gpu_memory_gb=max(e.gpu_memory_gb for e in entries),
                partitioning=part,
                owner=owner,
                nodes=tuple(entries),
            )
        )
    return pools
