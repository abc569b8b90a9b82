"""An elastic pool as a cluster registers it: a cloud pool that grows on demand.

``Cluster.config["elastic_pools"]`` maps a pool's name to its node maximum, GPUs per node,
provisioning delay and release after idle.  Placement reads it for any cluster: the nodes
its report does not list yet (a real cluster lists only the nodes that exist) are
provisionable, taken after the delay (the cluster's ``provisioning_s`` counts the longest);
the expected cost of a job there includes the idle tail its nodes are billed for after it.
A fleet file's elastic node groups register the same way (``ClusterDescription.elastic_pools``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

KEY = "elastic_pools"
FIELDS = ("max_nodes", "gpus_per_node", "provisioning_s", "idle_release_s")
DEFAULT_PROVISIONING_S, DEFAULT_IDLE_RELEASE_S = 480.0, 600.0


class ElasticConfigError(ValueError):
    """A bad ``elastic_pools`` entry; the message names the field."""


@dataclass(frozen=True)
class ElasticPool:
    max_nodes: int
    gpus_per_node: int
    provisioning_s: float = DEFAULT_PROVISIONING_S
    idle_release_s: float = DEFAULT_IDLE_RELEASE_S


def elastic_pools(config: Mapping[str, Any] | None) -> dict[str, ElasticPool]:
    """The cluster config's elastic pools (none when the key is absent); ElasticConfigError
    naming the field for a bad one."""
    raw = (config or {}).get(KEY)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ElasticConfigError(f"{KEY}: a mapping of pool name to its settings, not {raw!r}")
    return {str(name): _pool(f"{KEY}.{name}", body) for name, body in raw.items()}


def registered_pools(config: Mapping[str, Any] | None) -> dict[str, ElasticPool]:
    """``elastic_pools`` for reading at placement and on pages: an entry stored before the
    admin checked it, and bad, counts as none (the admin refuses one on save)."""
    try:
        return elastic_pools(config)
    except ElasticConfigError:
        return {}


def _pool(path: str, body: object) -> ElasticPool:
    if not isinstance(body, Mapping):
        raise ElasticConfigError(f"{path}: a mapping with {', '.join(FIELDS)}, not {body!r}")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise ElasticConfigError(f"{path}.{unknown[0]}: unknown (known: {', '.join(FIELDS)})")
    for key in ("max_nodes", "gpus_per_node"):
        if key not in body:
            raise ElasticConfigError(f"{path}.{key}: required")
    return ElasticPool(
        max_nodes=int(_number(f"{path}.max_nodes", body["max_nodes"], whole=True, low=1)),
        gpus_per_node=int(_number(f"{path}.gpus_per_node", body["gpus_per_node"], whole=True, low=1)),
        provisioning_s=_number(f"{path}.provisioning_s", body.get("provisioning_s", DEFAULT_PROVISIONING_S)),
        idle_release_s=_number(f"{path}.idle_release_s", body.get("idle_release_s", DEFAULT_IDLE_RELEASE_S)),
    )


def _number(path: str, value: object, *, whole: bool = False, low: float = 0.0) -> float:
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < low:
        what = "a whole number" if whole else "a number"
        raise ElasticConfigError(f"{path}: must be {what} of at least {low:g}, not {value!r}")
    return float(value)
