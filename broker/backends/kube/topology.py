"""A gang that must share an interconnect domain (``same_interconnect``), as Kubernetes'
own scheduler understands it: required pod affinity among the job's workers with the
domain's node label as topology key (``BackendSettings.interconnect_label``, the label the
inventory reads each node's domain from). The first worker may go to any domain with room
(a pod that matches its own affinity term is not held back by having no peers yet); every
later one must join its domain, so the workers never span two. Kueue's quota admission and
Volcano's gang wait the same way; neither needs a feature of its own for it.

Only where the site says every GPU node carries the label (``interconnect_affinity: true``):
the scheduler never places a pod with such a term on a node without the label, while
placement counts an unlabelled node as a domain of its own (``PoolIndex``), so on unlabelled
nodes the requirement would hold a gang the broker placed on one node pending for good.

Where a Kueue site runs Topology-Aware Scheduling with the interconnect label as a level of
its flavors' ``Topology`` (``kueue_topology: true``), the pod set also asks Kueue for that
level, so Kueue admits the gang only when one domain has room for all of it, rather than
admitting it by quota for its pods to wait at the scheduler.

Where a Volcano site names the HyperNode tier that is its interconnect domain
(``volcano_network_tier: N``), each node's domain is the tier-N HyperNode holding it
(``inventory.node_entries``) and the gang carries ``networkTopology: {mode: hard,
highestTierAllowed: N}``: Volcano starts it only inside one such HyperNode."""

from __future__ import annotations

from typing import Any

from broker.backends.kube.common import WORKLOAD_LABEL, label_value

from broker.backends.kube.settings import BackendSettings
from broker.spec import WorkloadSpec


def with_gang_topology(
    pod: dict[str, Any], spec: WorkloadSpec, workload_id: str, settings: BackendSettings
) -> dict[str, Any]:
    """The worker pod spec, with the domain requirement added when the gang asks for one."""
    gang = spec.one_domain and bool(settings.interconnect_label)
    if not (gang and settings.interconnect_affinity):
        return pod
    term = {
        "labelSelector": {"matchLabels": {WORKLOAD_LABEL: label_value(workload_id)}},
        "topologyKey": settings.interconnect_label,
    }
    affinity = dict(pod.get("affinity") or {})
    affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return {**pod, "affinity": affinity}


TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def kueue_pod_annotations(spec: WorkloadSpec, settings: BackendSettings) -> dict[str, str]:
    """The pod template's annotations for Kueue's Topology-Aware Scheduling, where the site has it."""
    if spec.one_domain and settings.kueue_topology and settings.interconnect_label:
        return {TAS_REQUIRED: settings.interconnect_label}
    return {}


def volcano_network_topology(spec: WorkloadSpec, settings: BackendSettings) -> dict[str, Any] | None:
    """The vcjob's ``networkTopology`` for a gang that must share a domain, where the site
    names its HyperNode tier; None otherwise."""
    if spec.one_domain and settings.volcano_network_tier:
        return {"mode": "hard", "highestTierAllowed": settings.volcano_network_tier}
    return None
