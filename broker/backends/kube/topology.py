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

from typing import Any, Sequence

from broker.backends.kube.common import WORKLOAD_LABEL, label_value
from broker.backends.kube.settings import BackendSettings
from broker.spec import WorkloadSpec
from broker.topology_names import HOST, generic_name, resolve_level


def with_gang_topology(
    pod: dict[str, Any], spec: WorkloadSpec, workload_id: str, settings: BackendSettings
) -> dict[str, Any]:
    """The worker pod spec, with the domain requirement added when the gang asks for one:
    one interconnect domain (where the site says every GPU node carries its label), or one
    host (``topology_level: host``; every node carries ``kubernetes.io/hostname``), required
    or preferred."""
    selector = {"matchLabels": {WORKLOAD_LABEL: label_value(workload_id)}}
    required, preferred = [], []
    if spec.one_domain and settings.interconnect_label and settings.interconnect_affinity:
        required.append({"labelSelector": selector, "topologyKey": settings.interconnect_label})
    if spec.level_required == HOST:
        required.append({"labelSelector": selector, "topologyKey": HOSTNAME_LABEL})
    if spec.level_preferred == HOST:
        term = {"labelSelector": selector, "topologyKey": HOSTNAME_LABEL}
        preferred.append({"weight": 100, "podAffinityTerm": term})
    if not (required or preferred):
        return pod
    affinity = dict(pod.get("affinity") or {})
    terms: dict[str, Any] = {}
    if required:
        terms["requiredDuringSchedulingIgnoredDuringExecution"] = required
    if preferred:
        terms["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    affinity["podAffinity"] = terms
    return {**pod, "affinity": affinity}


TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def kueue_pod_annotations(spec: WorkloadSpec, settings: BackendSettings, levels: Sequence[str] = ()) -> dict[str, str]:
    """The pod template's annotations for Kueue's Topology-Aware Scheduling, where the site
    has it: the interconnect label for ``same_interconnect``; for ``topology_level``, the
    node label of the level it names among ``levels`` (the labels of the cluster's
    ``Topology`` objects; ``host`` is ``kubernetes.io/hostname`` where a Topology lists it)."""
    if not settings.kueue_topology:
        return {}
    if spec.one_domain and settings.interconnect_label:
        return {TAS_REQUIRED: settings.interconnect_label}
    for asked, key in ((spec.level_required, TAS_REQUIRED), (spec.level_preferred, TAS_PREFERRED)):
        label = resolve_level(asked, levels) if asked else None
        if label == HOST:
            label = HOSTNAME_LABEL if HOSTNAME_LABEL in levels else None
        if label:
            return {key: label}
    return {}


def volcano_network_topology(spec: WorkloadSpec, settings: BackendSettings) -> dict[str, Any] | None:
    """The vcjob's ``networkTopology``: for a gang that must share a domain, where the site
    names its HyperNode tier (``hard`` at that tier); for ``topology_level``, the tier it
    names (``tier 2``, or ``rack``: tier 1), ``hard`` where required and ``soft`` where
    preferred; None otherwise."""
    if spec.one_domain and settings.volcano_network_tier:
        return {"mode": "hard", "highestTierAllowed": settings.volcano_network_tier}
    for asked, mode in ((spec.level_required, "hard"), (spec.level_preferred, "soft")):
        tier = _tier(asked) if asked else 0
        if tier:
            return {"mode": mode, "highestTierAllowed": tier}
    return None


def _tier(asked: str) -> int:
    """The HyperNode tier a job's level names: ``tier N`` itself, or the tier ``rack`` means."""
    own = asked if asked.startswith("tier ") else next((t for t in ("tier 1",) if generic_name(t) == asked), "")
    number = own.removeprefix("tier ")
    return int(number) if number.isdigit() and int(number) > 0 else 0
