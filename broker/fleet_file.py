"""Fleet descriptions: which clusters exist, where, at what price, with which GPUs.

A fleet file is YAML (see ``broker/fleets/demo.yaml``).  Loading checks every key and
reports every problem at once, each with its line and dotted key, because an admin
editing the file should fix it in one pass.  ``build_simulated_clusters`` turns a
description into simulated clusters for the demo, tests and trace replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml

from broker.backends.sim.model import FLAVORS, MIG_RE, NodeGroup, Partition, pool_name
from broker.backends.sim.simulated_clusters import SimulatorFleet
from broker.backends.sim.cluster import SimulatedCluster
from broker.spec import NAME_RE

SHARED_KINDS = ("time-slicing", "mps")  # a fleet file's shared groups: Kubernetes replicas

DEMO_FLEET_PATH = Path(__file__).resolve().parent / "fleets" / "demo.yaml"
KINDS = FLAVORS + ("simulator",)
LOCATIONS = ("onprem", "cloud")
GANG_SCHEDULERS = ("", "volcano")

_CLUSTER_KEYS = {
    "name",
    "kind",
    "flavor",
    "region",
    "location",
    "price_per_gpu_hour",
    "egress_per_gb",
    "image_pull_s",
    "provisioning_s",
    "data_locations",
    "nodes",
    "partitions",
    "gang_scheduler",
    "description",
}
_CLUSTER_REQUIRED = ("name", "kind", "region", "location", "price_per_gpu_hour", "nodes")
_NODE_KEYS = {
    "count",
    "gpu_model",
    "gpu_memory_gb",
    "gpus_per_node",
    "partitioning",
    "interconnect_domain",
    "quota",
    "partition",
    "name_prefix",
    "max_nodes",
    "provisioning_s",
    "idle_release_s",
    "replicas",
}
_NODE_REQUIRED = ("count", "gpu_model", "gpu_memory_gb", "gpus_per_node")
_PARTITION_KEYS = {"name", "max_gpus_per_job", "default"}


@dataclass(frozen=True)
class FleetProblem:
    key: str
    line: int | None
    message: str


class FleetError(ValueError):
    """A fleet file that cannot be used; ``problems`` names each key and line."""

    def __init__(self, source: str, problems: list[FleetProblem]):
        self.source, self.problems = source, problems
        lines = [f"{source}:{p.line or '?'}: {p.key}: {p.message}" for p in problems]
        super().__init__(f"invalid fleet file {source}:\n  " + "\n  ".join(lines))


@dataclass(frozen=True)
class ClusterDescription:
    name: str
    kind: str  # slurm | kueue | volcano | simulator
    flavor: str  # the local semantics: slurm | kueue | volcano
    region: str
    location: str  # onprem | cloud
    price_per_gpu_hour: float
    egress_per_gb: float = 0.0
    image_pull_s: float = 0.0
    provisioning_s: float = 0.0
    data_locations: tuple[str, ...] = ()
    node_groups: tuple[NodeGroup, ...] = ()
    partitions: tuple[Partition, ...] = ()
    gang_scheduler: str = ""
    description: str = ""

    @property
    def simulated(self) -> bool:
        return self.kind == "simulator"

    @property
    def elastic_pools(self) -> dict[str, dict[str, float]]:
        """Per elastic pool (sim.elastic), what registration stores as the cluster's
        ``config.elastic_pools``: its node maximum, GPUs per node, delay and idle release."""
        return {
            pool_name(g.gpu_model, g.gpu_memory_gb, g.partitioning): {
                "max_nodes": g.max_count,
                "gpus_per_node": g.gpus_per_node,
                "provisioning_s": g.provisioning_s,
                "idle_release_s": g.idle_release_s,
            }
            for g in self.node_groups
            if g.max_count is not None
        }

    @property
    def gpus_total(self) -> int:
        """Allocatable units: whole GPUs, MIG slices on partitioned nodes, replicas on shared."""
        return sum(g.count * g.gpus_per_node * g.units_of_a_gpu for g in self.node_groups)


@dataclass(frozen=True)
class FleetDescription:
    clusters: tuple[ClusterDescription, ...]
    source: str = ""

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.clusters]

    def cluster(self, name: str) -> ClusterDescription:
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(f"fleet {self.source or '(inline)'} has no cluster {name!r}")


# --- YAML with line numbers ------------------------------------------------------------


class _Map(dict):
    """A YAML mapping that remembers where it and each of its keys were written."""

    line: int = 0
    key_lines: dict[Any, int]


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int):
        super().__init__(key)
        self.key, self.line = key, line


class _Loader(yaml.SafeLoader):
    pass


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> _Map:
    loader.flatten_mapping(node)
    result = _Map()
    result.line, result.key_lines = node.start_mark.line + 1, {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in result:
            raise _DuplicateKey(key, line)  # plain YAML would keep the last one silently
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)


def _parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as dup:
        raise FleetError(source, [FleetProblem(str(dup.key), dup.line, "key given twice")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise FleetError(source, [FleetProblem("(yaml)", line, problem)]) from None
    except TypeError as exc:  # e.g. a list used as a mapping key
        raise FleetError(source, [FleetProblem("(yaml)", None, str(exc))]) from None


# --- validation ------------------------------------------------------------------------


class _Checker:
    def __init__(self, source: str):
        self.source = source
        self.problems: list[FleetProblem] = []

    def error(self, key: str, line: int | None, message: str) -> None:
        self.problems.append(FleetProblem(key, line, message))

    def mapping(
        self, value: Any, path: str, line: int | None, allowed: set[str], required: Iterable[str]
    ) -> _Map | None:
        if not isinstance(value, _Map):
            self.error(path, line, "must be a mapping of keys to values")
            return None
        for key in value:
            if key not in allowed:
                self.error(
                    f"{path}.{key}",
                    value.key_lines.get(key),
                    f"unknown key (expected one of: {', '.join(sorted(allowed))})",
                )
        for key in required:
            if key not in value:
                self.error(f"{path}.{key}", value.line, "is required")
        return value

    def text(self, m: _Map, key: str, path: str, default: str = "", choices: Iterable[str] | None = None) -> str:
        value = m.get(key, default)
        where = (f"{path}.{key}", m.key_lines.get(key, m.line))
        if not isinstance(value, str):
            self.error(*where, f"must be text, not {value!r}")
            return default
        if choices is not None and value not in choices:
            shown = ", ".join(c or "''" for c in choices)
            self.error(*where, f"must be one of {shown}, not {value!r}")
        return value.strip()

    def number(
        self,
        m: _Map,
        key: str,
        path: str,
        default: float | None = 0.0,
        *,
        whole: bool = False,
        minimum: float = 0,
        maximum: float | None = None,
    ) -> Any:
        value = m.get(key, default)
        where = (f"{path}.{key}", m.key_lines.get(key, m.line))
        kinds = (int,) if whole else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            self.error(*where, f"must be a {'whole number' if whole else 'number'}, not {value!r}")
            return default
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and at most {maximum:g}" if maximum is not None else ""
            self.error(*where, f"must be at least {minimum:g}{upper}, not {value!r}")
            return default
        return value

    def text_list(self, m: _Map, key: str, path: str) -> tuple[str, ...]:
        value = m.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.error(f"{path}.{key}", m.key_lines.get(key, m.line), "must be a list of names")
            return ()
        return tuple(value)

    def items(self, m: _Map, key: str, path: str, required: bool) -> list[Any]:
        value = m.get(key, [])
        if not isinstance(value, list) or (required and not value):
            self.error(
                f"{path}.{key}",
                m.key_lines.get(key, m.line),
                "must be a non-empty list" if required else "must be a list",
            )
            return []
        return value


def _node_group(
    ck: _Checker, raw: Any, path: str, line: int | None, flavor: str, partitions: set[str]
) -> NodeGroup | None:
    m = ck.mapping(raw, path, line, _NODE_KEYS, _NODE_REQUIRED)
    if m is None:
        return None
    before = len(ck.problems)
    partitioning = ck.text(m, "partitioning", path, "whole")
    shared = partitioning in SHARED_KINDS
    if partitioning != "whole" and not shared and not MIG_RE.match(partitioning):
        ck.error(
            f"{path}.partitioning",
            m.key_lines.get("partitioning"),
            f"must be 'whole', a MIG profile such as 1g.10gb, time-slicing or mps, not {partitioning!r}",
        )
    replicas = ck.number(m, "replicas", path, 4, whole=True, minimum=2, maximum=64) if "replicas" in m else 4
    if "replicas" in m and not shared:
        ck.error(f"{path}.replicas", m.key_lines.get("replicas"), "applies to a time-slicing or mps group only")
    if shared and flavor == "slurm":
        ck.error(f"{path}.partitioning", m.key_lines.get("partitioning"), "time-slicing and mps are Kubernetes sharing")
    quota = m.get("quota")
    if quota is not None:
        quota = ck.number(m, "quota", path, 0, whole=True)
        if flavor != "kueue":
            ck.error(f"{path}.quota", m.key_lines.get("quota"), "a local quota applies to the kueue flavor only")
    partition = ck.text(m, "partition", path)
    if partition and flavor != "slurm":
        ck.error(f"{path}.partition", m.key_lines.get("partition"), "partitions exist on the slurm flavor only")
    elif partition and partitions and partition not in partitions:
        ck.error(
            f"{path}.partition",
            m.key_lines.get("partition"),
            f"names no partition of this cluster ({', '.join(sorted(partitions))})",
        )
    elastic = _elastic(ck, m, path)
    group = NodeGroup(
        count=ck.number(m, "count", path, 1, whole=True, minimum=0 if elastic else 1, maximum=10_000),
        gpu_model=ck.text(m, "gpu_model", path),
        gpu_memory_gb=ck.number(m, "gpu_memory_gb", path, 1, whole=True, minimum=1),
        gpus_per_node=ck.number(m, "gpus_per_node", path, 1, whole=True, minimum=1, maximum=16),
        partitioning=partitioning,
        interconnect_domain=ck.text(m, "interconnect_domain", path),
        partition=partition,
        name_prefix=ck.text(m, "name_prefix", path),
        quota=quota,
        replicas=replicas,
        **elastic,
    )
    if group.max_count is not None and group.max_count < group.count:
        ck.error(f"{path}.max_nodes", m.key_lines.get("max_nodes"), f"must be at least count ({group.count})")
    if "gpu_model" in m and not group.gpu_model:
        ck.error(f"{path}.gpu_model", m.key_lines.get("gpu_model"), "must not be empty")
    return group if len(ck.problems) == before else None


def _elastic(ck: _Checker, m: _Map, path: str) -> dict[str, Any]:
    """An elastic group (sim.elastic): ``count`` nodes always up, up to ``max_nodes`` on
    demand, each after ``provisioning_s`` (8 min) and released after ``idle_release_s``
    idle (10 min)."""
    if "max_nodes" not in m:
        for key in ("provisioning_s", "idle_release_s"):
            if key in m:
                ck.error(f"{path}.{key}", m.key_lines.get(key), "applies to an elastic group only: give max_nodes")
        return {}
    return {
        "max_count": ck.number(m, "max_nodes", path, 0, whole=True, minimum=1, maximum=10_000),
        "provisioning_s": float(ck.number(m, "provisioning_s", path, 480, minimum=0)),
        "idle_release_s": float(ck.number(m, "idle_release_s", path, 600, minimum=0)),
    }


def _partitions(ck: _Checker, m: _Map, path: str, flavor: str) -> tuple[Partition, ...]:
    if "partitions" not in m:
        return ()
    if flavor != "slurm":
        ck.error(f"{path}.partitions", m.key_lines.get("partitions"), "partitions exist on the slurm flavor only")
        return ()
    out: list[Partition] = []
    for j, raw in enumerate(ck.items(m, "partitions", path, required=True)):
        ppath = f"{path}.partitions[{j}]"
        p = ck.mapping(raw, ppath, m.key_lines.get("partitions"), _PARTITION_KEYS, ("name",))
        if p is None:
            continue
        cap = p.get("max_gpus_per_job")
        if cap is not None:
            cap = ck.number(p, "max_gpus_per_job", ppath, None, whole=True, minimum=1)
        default = p.get("default", False)
        if not isinstance(default, bool):
            ck.error(f"{ppath}.default", p.key_lines.get("default"), "must be true or false")
        out.append(Partition(ck.text(p, "name", ppath), cap, default is True))
    names = [p.name for p in out]
    if len(set(names)) != len(names):
        ck.error(f"{path}.partitions", m.key_lines.get("partitions"), "names repeat")
    if sum(p.default for p in out) > 1:
        ck.error(f"{path}.partitions", m.key_lines.get("partitions"), "at most one partition may be the default")
    return tuple(out)


def _flavor(ck: _Checker, m: _Map, path: str, kind: str) -> str:
    if kind != "simulator":
        if "flavor" in m and m["flavor"] != kind:
            ck.error(
                f"{path}.flavor",
                m.key_lines.get("flavor"),
                f"contradicts kind {kind!r} (only kind: simulator takes a flavor)",
            )
        return kind if kind in FLAVORS else "slurm"
    if "flavor" not in m:
        ck.error(f"{path}.flavor", m.line, f"is required when kind is simulator ({', '.join(FLAVORS)})")
        return "slurm"
    return ck.text(m, "flavor", path, "slurm", choices=FLAVORS)


def _cluster(ck: _Checker, raw: Any, path: str, line: int | None) -> ClusterDescription | None:
    m = ck.mapping(raw, path, line, _CLUSTER_KEYS, _CLUSTER_REQUIRED)
    if m is None:
        return None
    before = len(ck.problems)
    name = ck.text(m, "name", path)
    if "name" in m and not NAME_RE.match(name):
        ck.error(f"{path}.name", m.key_lines.get("name"), "use lower-case letters, digits and '-' (like onprem-slurm)")
    kind = ck.text(m, "kind", path, "simulator", choices=KINDS)
    flavor = _flavor(ck, m, path, kind)
    gang = ck.text(m, "gang_scheduler", path, "", choices=GANG_SCHEDULERS)
    if gang and flavor != "kueue":
        ck.error(
            f"{path}.gang_scheduler",
            m.key_lines.get("gang_scheduler"),
            "a gang scheduler beside the queue applies to the kueue flavor only",
        )
    partitions = _partitions(ck, m, path, flavor)
    groups = [
        _node_group(ck, raw_group, f"{path}.nodes[{j}]", m.key_lines.get("nodes"), flavor, {p.name for p in partitions})
        for j, raw_group in enumerate(ck.items(m, "nodes", path, required=True))
    ]
    desc = ClusterDescription(
        name=name,
        kind=kind,
        flavor=flavor,
        region=ck.text(m, "region", path),
        location=ck.text(m, "location", path, "onprem", choices=LOCATIONS),
        price_per_gpu_hour=float(ck.number(m, "price_per_gpu_hour", path)),
        egress_per_gb=float(ck.number(m, "egress_per_gb", path)),
        image_pull_s=float(ck.number(m, "image_pull_s", path)),
        provisioning_s=float(ck.number(m, "provisioning_s", path)),
        data_locations=ck.text_list(m, "data_locations", path),
        node_groups=tuple(g for g in groups if g is not None),
        partitions=partitions,
        gang_scheduler=gang,
        description=ck.text(m, "description", path),
    )
    if "region" in m and not desc.region:
        ck.error(f"{path}.region", m.key_lines.get("region"), "must not be empty")
    return desc if len(ck.problems) == before else None


def parse_fleet(text: str, source: str = "<fleet>") -> FleetDescription:
    """Parse and check a fleet description; raises FleetError listing every problem."""
    data = _parse_yaml(text, source)
    ck = _Checker(source)
    top = ck.mapping(data, "(top)", 1, {"clusters", "description"}, ("clusters",))
    clusters: list[ClusterDescription] = []
    if top is not None:
        raws = ck.items(top, "clusters", "(top)", required=True)
        for i, raw in enumerate(raws):
            line = raw.line if isinstance(raw, _Map) else top.key_lines.get("clusters")
            desc = _cluster(ck, raw, f"clusters[{i}]", line)
            if desc is not None:
                clusters.append(desc)
        _check_unique(ck, raws)
    if ck.problems:
        raise FleetError(source, ck.problems)
    return FleetDescription(clusters=tuple(clusters), source=source)


def _check_unique(ck: _Checker, raws: list[Any]) -> None:
    seen: set[str] = set()
    for i, raw in enumerate(raws):
        name = raw.get("name") if isinstance(raw, _Map) else None
        if isinstance(name, str) and name in seen:
            ck.error(f"clusters[{i}].name", raw.key_lines.get("name"), f"cluster {name!r} is described twice")
        if isinstance(name, str):
            seen.add(name)


def load_fleet(path: str | Path) -> FleetDescription:
    """Read and check a fleet file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FleetError(str(path), [FleetProblem("(file)", None, exc.strerror or str(exc))]) from None
    return parse_fleet(text, source=str(path))


def load_demo_fleet() -> FleetDescription:
    return load_fleet(DEMO_FLEET_PATH)


def build_simulated_clusters(fleet: FleetDescription, sim: SimulatorFleet | None = None) -> list[SimulatedCluster]:
    """Create (or replace) one simulated cluster per described cluster, on ``sim``'s clock
    (default: the process-wide simulated fleet)."""
    sim = sim or SimulatorFleet.instance()
    return [
        sim.add_cluster(
            c.name, c.flavor, node_groups=c.node_groups, partitions=c.partitions, gang_scheduler=c.gang_scheduler
        )
        for c in fleet.clusters
    ]
