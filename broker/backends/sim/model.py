"""Plain state of a simulated cluster: nodes, partitions, jobs and fault switches."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, fields

from broker.backends.base import JobState, Reason
from broker.spec import SHARED_PARTITIONINGS, WorkloadSpec
from broker.topology_names import HOST

FLAVORS = ("slurm", "kueue", "volcano")
# The scheduler that owns a flavor's GPUs, as reported in inventory (NodeInventory.owner).
OWNER = {"slurm": "slurm", "kueue": "kueue", "volcano": "volcano"}
PRIORITY_RANK = {"high": 0, "normal": 1, "low": 2}
MIG_RE = re.compile(r"^([1-7])g\.(\d{1,3})gb$")
# How many slices of a profile one A100/H100 holds (NVIDIA's MIG geometry).
MIG_SLICES = {1: 7, 2: 3, 3: 2, 4: 1, 7: 1}
# GPUs shared by time-slicing or MPS: each GPU is ``replicas`` units with its whole memory
MAX_SLOW_S = 30.0  # a slow cluster still answers: the delay is bounded


def mig_geometry(profile: str) -> tuple[int, int]:
    """(slices per GPU, memory per slice in GB) of a MIG profile such as ``1g.10gb``."""
    match = MIG_RE.match(profile)
    if not match:
        raise ValueError(f"not a MIG profile: {profile!r}")
    compute, memory = int(match.group(1)), int(match.group(2))
    return MIG_SLICES.get(compute, 7 // compute), memory


@functools.lru_cache(maxsize=1024)  # pure; asked for every node and node group built
def pool_name(gpu_model: str, gpu_memory_gb: int, partitioning: str) -> str:
    """Pool (and Kueue ResourceFlavor) name: ``a100-80gb`` or ``a100-1g.10gb``."""
    if partitioning == "whole":
        return f"{gpu_model}-{gpu_memory_gb}gb".lower()
    return f"{gpu_model}-{partitioning}".lower()


def gpu_resource(partitioning: str) -> str:
    """The Kubernetes extended resource a pod asks for."""
    if partitioning in SHARED_PARTITIONINGS:
        return "nvidia.com/gpu.shared"
    return "nvidia.com/gpu" if partitioning == "whole" else f"nvidia.com/mig-{partitioning}"


_POOL_INPUTS = frozenset({"gpu_model", "gpu_memory_gb", "partitioning", "flavor"})


SIM_LEVEL = "interconnect"  # the one topology level simulated nodes report (their group's domain)


@dataclass
class SimNode:
    """One node.  ``gpus`` counts allocatable units: whole GPUs, or MIG slices."""

    name: str
    gpu_model: str
    gpu_memory_gb: int  # per unit: a MIG slice's memory on a partitioned node
    gpus: int
    partitioning: str = "whole"
    units_per_gpu: int = 1  # a shared node's replicas (or shards) per GPU; a job pays units / this
    interconnect_domain: str = ""
    partition: str = ""  # Slurm partition; unused by the Kubernetes flavors
    healthy: bool = True
    draining: bool = False
    # its GPUs fail a job's pre-flight check while the scheduler takes them as healthy (the
    # lever ``break_gpus``): what only a check on the node itself finds
    gpus_broken: bool = False
    allocated: int = 0
    extra_owners: list[str] = field(default_factory=list)  # claim_node_by(): a conflict
    # the pool's name where a real cluster's inventory names it (a Kueue ResourceFlavor
    # "a100"), else made from the model: ``pool_name``
    flavor: str = ""
    # an elastic node (a cloud pool's above its minimum, sim.elastic): up only from when it
    # was requested plus its provisioning delay until it has been idle its release time
    elastic: bool = False
    up: bool = True
    requested_at: float | None = None  # set while requested or up: billed from then
    ready_at: float | None = None  # set while provisioning
    idle_since: float | None = None  # set while up and idle
    provisioning_s: float = 0.0
    idle_release_s: float = 0.0
    billed_s: float = 0.0  # node-seconds of the requests already released

    def __setattr__(self, name: str, value: object) -> None:
        # the pool is cached here and clusters index their nodes by it, so what it is
        # made of is fixed once the node is built (nothing needs to change it)
        if name in _POOL_INPUTS and name in self.__dict__:
            raise AttributeError(f"node {self.name}: {name} is fixed once the node is built")
        object.__setattr__(self, name, value)

    @functools.cached_property
    def pool(self) -> str:
        # cached: every scheduling pass asks it of every node and running job
        return self.flavor or pool_name(self.gpu_model, self.gpu_memory_gb, self.partitioning)

    @property
    def usable(self) -> bool:
        return self.healthy and not self.draining and self.up

    @property
    def free(self) -> int:
        return max(0, self.gpus - self.allocated) if self.usable else 0


@dataclass(frozen=True)
class NodeGroup:
    """``count`` identical nodes, as a fleet file describes them."""

    count: int
    gpu_model: str
    gpu_memory_gb: int
    gpus_per_node: int
    partitioning: str = "whole"
    interconnect_domain: str = ""
    partition: str = ""
    name_prefix: str = ""
    quota: int | None = None  # Kueue nominal quota for this group's flavor
    # elastic (a cloud pool): ``count`` nodes are always up, up to ``max_count`` more come on
    # request after ``provisioning_s`` and go after ``idle_release_s`` idle (sim.elastic)
    max_count: int | None = None
    provisioning_s: float = 480.0
    idle_release_s: float = 600.0
    replicas: int = 4  # units per GPU of a shared (time-slicing, MPS) group

    @property
    def prefix(self) -> str:
        """Node names are the prefix plus a two-digit index: ``a100-80gb-01``."""
        if self.name_prefix:
            return self.name_prefix
        name = pool_name(self.gpu_model, self.gpu_memory_gb, self.partitioning)
        return name.replace(".", "-") + "-"

    @property
    def shared(self) -> bool:
        return self.partitioning in SHARED_PARTITIONINGS

    @property
    def units_of_a_gpu(self) -> int:
        """Allocatable units one GPU of the group is: itself, its MIG slices or its replicas."""
        if self.shared:
            return self.replicas
        return 1 if self.partitioning == "whole" else mig_geometry(self.partitioning)[0]

    def build(self, start_index: int = 1) -> list[SimNode]:
        units = self.gpus_per_node * self.units_of_a_gpu
        memory = self.gpu_memory_gb
        if not self.shared and self.partitioning != "whole":
            memory = mig_geometry(self.partitioning)[1]  # a slice's; a replica has the GPU's whole memory
        # a replica is charged as its part of a GPU; a MIG slice as a unit of its own
        per_gpu = self.replicas if self.shared else 1
        return [
            SimNode(
                name=f"{self.prefix}{start_index + i:02d}",
                gpu_model=self.gpu_model,
                gpu_memory_gb=memory,
                gpus=units,
                partitioning=self.partitioning,
                units_per_gpu=per_gpu,
                interconnect_domain=self.interconnect_domain,
                partition=self.partition,
                elastic=i >= self.count,
                up=i < self.count,
                provisioning_s=self.provisioning_s,
                idle_release_s=self.idle_release_s,
            )
            for i in range(max(self.count, self.max_count or 0))
        ]


@dataclass(frozen=True)
class Partition:
    """A Slurm partition with the per-job GPU cap of its QoS (``MaxTRESPerJob=gres/gpu``)
    and its ``MaxTime``."""

    name: str
    max_gpus_per_job: int | None = None
    default: bool = False
    max_time_s: float | None = None


@dataclass
class JobRequest:
    """What local admission needs from a spec (foreign jobs have no spec)."""

    name: str
    gpus_per_worker: int
    workers: int
    partitioning: str = "whole"
    gpu_models: tuple[str, ...] = ()
    gpu_class: str = ""
    min_gpu_memory_gb: int = 0
    same_interconnect: bool = False
    same_host: bool = False  # every worker on one node (the spec's topology_level "host")
    gpu_check: bool = False  # the pre-flight GPU check runs on every worker first (broker.preflight)
    exclude_nodes: tuple[str, ...] = ()  # nodes it may not run on (the spec's, set at dispatch)
    priority: str = "normal"
    time_limit_s: float | None = None
    # Slurm: each worker on a node of its own (the backend asks --nodes=workers with one
    # task per node); Kubernetes may put several of a gang's pods on one node
    one_per_node: bool = False

    @property
    def one_domain(self) -> bool:
        """The workers must share one interconnect domain (as ``WorkloadSpec.one_domain``)."""
        return self.same_interconnect and self.workers > 1

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_worker * self.workers


@dataclass
class SimJob:
    job_id: str
    workload_id: str | None
    request: JobRequest
    account: str
    seq: int
    submitted_at: float
    run_s: float  # on the cluster's clock, already scaled
    final_state: JobState = JobState.COMPLETED
    end_raw: str = ""  # raw text once ended, e.g. a time-limit kill
    exit_code: int | None = None  # None: 0 when completed, 1 when failed
    end_worker: str = ""  # the worker whose end ended the job (killed for memory)
    partition: str = ""
    state: JobState = JobState.PENDING
    reason: Reason = Reason.NONE
    raw_reason: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    first_started_at: float | None = None  # before any preemption sent it back to the queue
    preempted: int = 0  # times evicted by a higher-priority job (Kueue)
    ran_before_s: float = 0.0  # cluster seconds it ran before those evictions (its usage counts them)
    # Volcano: its PodGroup is Inqueue (passed the enqueue step), so its GPUs count against
    # its Queue's capability from then on, running or not; its pods exist (and can be
    # allocated) from ``ready_at`` on, the next scheduling session
    enqueued: bool = False
    ready_at: float = 0.0
    qos: str = ""  # Slurm: the QoS a local user named (the broker's jobs take the default)
    placement: list[tuple[str, int]] = field(default_factory=list)  # (node, gpus)
    gpu_model: str = ""
    units_per_gpu: int = 1  # of the nodes it started on: a share job's GPU-seconds are units / this
    doomed: bool = False  # loses_job: vanishes once seen running
    seen_running: bool = False
    lost: bool = False  # the cluster no longer reports it

    @property
    def gpus(self) -> int:
        return self.request.total_gpus

    @property
    def ends_at(self) -> float | None:
        return None if self.started_at is None else self.started_at + self.run_s

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(node for node, _ in self.placement))

    @property
    def active(self) -> bool:
        return not self.lost and self.state in (JobState.PENDING, JobState.RUNNING)


@dataclass
class Faults:
    """Fault switches of one cluster.  ``loses_job`` and ``accepts_but_times_out`` are
    one-shot (they hit the next accepted job); the others hold until cleared."""

    unreachable: bool = False
    slow_s: float = 0.0
    rejects: str = ""  # non-empty: every submit is refused with this reason
    loses_job: bool = False
    accepts_but_times_out: bool = False

    def clear(self) -> None:
        self.unreachable, self.slow_s, self.rejects = False, 0.0, ""
        self.loses_job = self.accepts_but_times_out = False

    def set(self, **changes: object) -> None:
        known = {f.name for f in fields(self)}
        for key, value in changes.items():
            if key not in known:
                raise ValueError(f"unknown fault {key!r}; known: {sorted(known)}")
            if key == "slow_s":
                value = min(max(0.0, float(value)), MAX_SLOW_S)  # type: ignore[arg-type]
            setattr(self, key, value)


def request_from_spec(spec: WorkloadSpec, *, one_per_node: bool = False) -> JobRequest:
    return JobRequest(
        one_per_node=one_per_node,
        name=spec.name,
        gpus_per_worker=spec.gpus_per_worker,
        workers=spec.workers,
        partitioning=spec.partitioning,
        gpu_models=tuple(spec.gpu_models),
        gpu_class=spec.gpu_class,
        min_gpu_memory_gb=spec.min_gpu_memory_gb,
        # the simulator's one level is its node groups' interconnect domain
        same_interconnect=spec.same_interconnect or spec.level_required == SIM_LEVEL,
        same_host=spec.level_required == HOST,
        gpu_check=spec.gpu_check,
        exclude_nodes=tuple(spec.exclude_nodes),
        priority=spec.priority,
        time_limit_s=spec.time_limit_minutes * 60.0,
    )
