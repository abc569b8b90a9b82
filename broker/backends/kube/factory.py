"""Build a Kubernetes backend from a Cluster row's ``config`` (never secrets) and token.

Config keys (all optional unless said):
- connection: ``host`` (API URL; the resolved credentials are its bearer token),
  ``ca_cert``, ``verify_ssl``; or ``kubeconfig`` (path) and ``context``; or
  ``in_cluster: true``.  Without any, $KUBECONFIG / ~/.kube/config is used.
- conventions: ``namespace`` and ``queue`` (defaults when the project names none),
  ``image``, ``priority_classes`` ({"low": ..., "high": ...}), ``model_names``
  ({node product label: broker model name}), ``gpu_classes`` ({class: [models]};
  default: the classes the broker passes in, those of the policy in force),
  ``node_selector``, ``tolerated_taints``,
  ``interconnect_label``, ``interconnect_affinity`` (true where every GPU node carries that
  label: a gang that must share a domain carries pod affinity on it), ``kueue_topology``
  (true where Kueue's Topology-Aware Scheduling has the interconnect label as a level: a gang
  that must share a domain asks Kueue for it), ``volcano_network_tier`` (Volcano only: the
  HyperNode tier that is the interconnect domain, a whole number from 1; nodes are placed by
  the tier's HyperNode holding them, and a gang that must share a domain carries
  ``networkTopology`` hard at that tier),
  ``kueue_api_version`` (v1beta2, the default, or v1beta1 for a
  Kueue before v0.15; Kueue v0.20 serves v1beta2 only).
- MultiKueue: ``workers`` ({worker name: {kubeconfig, context} or {host, ca_cert}}),
  read-only access used for inventory only; ``multikueue_config`` (one config name).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from broker.backends.base import Backend, Unavailable
from broker.backends.kube.common import KubeConfig
from broker.backends.kube.settings import BackendSettings
from broker.backends.kube.discovery import KUEUE_API_VERSIONS
from broker.backends.kube.kueue import KueueBackend
from broker.backends.kube.multikueue import MultiKueueBackend
from broker.backends.kube.volcano import VolcanoBackend

_CONNECTION = {"host", "ca_cert", "verify_ssl", "kubeconfig", "context", "in_cluster"}
_SETTINGS = {
    "namespace": "default_namespace",
    "queue": "default_queue",
    "image": "default_image",
    "priority_classes": "priority_classes",
    "model_names": "model_names",
    "gpu_classes": "gpu_classes",
    "node_selector": "node_selector",
    "tolerated_taints": "tolerated_taints",
    "interconnect_label": "interconnect_label",
    "kueue_topology": "kueue_topology",
    "interconnect_affinity": "interconnect_affinity",
    "volcano_network_tier": "volcano_network_tier",
}
_OTHER = {"kueue_api_version", "workers", "multikueue_config"}


def kube_config(raw: Mapping[str, Any], token: str, timeout_s: float) -> KubeConfig:
    return KubeConfig(
        host=str(raw.get("host", "")),
        kubeconfig=str(raw.get("kubeconfig", "")),
        context=str(raw.get("context", "")),
        in_cluster=bool(raw.get("in_cluster", False)),
        verify_ssl=bool(raw.get("verify_ssl", True)),
        ca_cert=str(raw.get("ca_cert", "")),
        token=token,
        connect_timeout_s=min(5.0, timeout_s),
        read_timeout_s=timeout_s,
    )


def backend_settings(
    config: Mapping[str, Any], gpu_classes: Mapping[str, Sequence[str]] | None = None
) -> BackendSettings:
    """``gpu_classes``: the broker's classes, so a class-only spec still selects its models
    (none: it runs wherever the queue's flavors allow); the config's own key wins."""
    values: dict[str, Any] = {}
    for key, attr in _SETTINGS.items():
        if key in config:
            values[attr] = config[key]
    for flag in ("kueue_topology", "interconnect_affinity"):
        if not isinstance(values.get(flag, False), bool):
            raise Unavailable(f"{flag} must be true or false, not {values[flag]!r}")
    tier = values.get("volcano_network_tier", 0)
    if isinstance(tier, bool) or not isinstance(tier, int) or tier < 0:
        raise Unavailable(f"volcano_network_tier must be a whole number from 1 (0: none), not {tier!r}")
    if "tolerated_taints" in values:
        values["tolerated_taints"] = tuple(values["tolerated_taints"])
    if "gpu_classes" not in values:
        values["gpu_classes"] = dict(gpu_classes or {})
    values["gpu_classes"] = {k: tuple(v) for k, v in values["gpu_classes"].items()}
    return BackendSettings(**values)


def kube_backend_from_config(
    kind: str,
    cluster: str,
    config: Mapping[str, Any],
    token: str = "",
    timeout_s: float = 20.0,
    gpu_classes: Mapping[str, Sequence[str]] | None = None,
) -> Backend:
    """The backend for one cluster; a bad config raises Unavailable saying which key.
    ``gpu_classes`` come from the broker (the registry passes the policy in force's)."""
    unknown = set(config) - _CONNECTION - set(_SETTINGS) - _OTHER
    if unknown:
        raise Unavailable(f"cluster {cluster}: unknown config keys {sorted(unknown)}")
    try:
        connection = kube_config(config, token, timeout_s)
        settings = backend_settings(config, gpu_classes)
    except (TypeError, ValueError, AttributeError) as exc:
        raise Unavailable(f"cluster {cluster}: invalid config: {exc}") from exc
    api_version = str(config.get("kueue_api_version", KUEUE_API_VERSIONS[0]))
    if api_version not in KUEUE_API_VERSIONS:
        raise Unavailable(
            f"cluster {cluster}: invalid config: kueue_api_version {api_version!r} is not one of "
            f"{', '.join(KUEUE_API_VERSIONS)}"
        )
    if settings.volcano_network_tier and kind != "volcano":
        raise Unavailable(
            f"cluster {cluster}: invalid config: volcano_network_tier is for a Volcano cluster, not {kind}"
        )
    if kind == "kueue":
        return KueueBackend(cluster, connection, settings, api_version=api_version)
    if kind == "volcano":
        return VolcanoBackend(cluster, connection, settings)
    if kind == "multikueue":
        workers = {name: kube_config(raw, "", timeout_s) for name, raw in dict(config.get("workers") or {}).items()}
        return MultiKueueBackend(
            cluster,
            connection,
            settings,
            api_version=api_version,
            workers=workers,
            multikueue_config=str(config.get("multikueue_config", "")),
        )
    raise Unavailable(f"cluster {cluster}: {kind!r} is not a Kubernetes backend kind")
