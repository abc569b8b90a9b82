"""One calibration: a job list played on a real control plane (a Slurm partition, Kueue
LocalQueues) and on the simulator built from that cluster's inventory and limits as its
backend reads them, repeated, compared run by run."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from datetime import datetime

from broker import runtime
from broker.backends.slurm.commands import CommandTransport
from broker.calibration.compare import Agreement, compare
from broker.calibration.jobs import JobList
from broker.calibration.played import Played
from broker.calibration.kube import KubePlayer, KubeSide, kueue_start, volcano_start
from broker.calibration.simulated import (
    NotCalibratable,
    inventory_from_json,
    inventory_json,
    models,
    play,
    simulator_for,
    simulator_for_kueue,
    simulator_for_volcano,
)
from broker.calibration.slurm import SlurmPlayer, config_values
from broker.backends.sim.cluster import SimulatedCluster
from broker.cluster_report import InventorySnapshot


@dataclass(frozen=True)
class SchedulerCycle:
    """What the real scheduler's cycle is, as its configuration says."""

    words: str  # "sched_interval=60 bf_interval=2"
    cycle_s: float  # the tolerance: a start within this of another is tied


@dataclass
class Repetition:
    real: Played
    simulated: Played
    agreement: Agreement


@dataclass
class Calibration:
    cluster: str
    control_plane: str
    partition: str
    job_list: str
    cycle: SchedulerCycle
    started_at: datetime
    commit: str
    repetitions: list[Repetition] = field(default_factory=list)
    inventory: dict[str, Any] = field(default_factory=dict)  # the first repetition's, as read
    local_queue: str = ""  # Kueue, Volcano: where the list's local jobs go (``partition``: the broker's)
    pool: str = ""  # Volcano: the GPU pool the jobs ask for

    def to_json(self) -> dict[str, object]:
        return {
            "cluster": self.cluster,
            "control_plane": self.control_plane,
            "partition": self.partition,
            "local_queue": self.local_queue,
            **({"pool": self.pool} if self.pool else {}),
            "job_list": self.job_list,
            "scheduler": self.cycle.words,
            "cycle_s": self.cycle.cycle_s,
            "started_at": self.started_at.isoformat(),
            "commit": self.commit,
            "inventory": self.inventory,
            "repetitions": [
                {"agreement": r.agreement.to_json(), "real": r.real.to_json(), "simulated": r.simulated.to_json()}
                for r in self.repetitions
            ],
        }


def slurm_cycle(transport: CommandTransport) -> SchedulerCycle:
    """bf_interval (default 30 s) and sched_interval (default 60 s) from ``scontrol show
    config``: backfill starts come on the first's beat; the tolerance is the backfill cycle."""
    params = config_values(transport).get("SchedulerParameters", "")
    given = dict(p.split("=", 1) for p in params.split(",") if "=" in p)
    bf, main = float(given.get("bf_interval", 30)), float(given.get("sched_interval", 60))
    # backfill plans in slots of bf_resolution (default 60 s), which the simulator does not
    # model (docs/simulator.md): printed so that a calibration says what it ran under
    res = float(given.get("bf_resolution", 60))
    return SchedulerCycle(words=f"sched_interval={main:g} bf_interval={bf:g} bf_resolution={res:g}", cycle_s=bf)


def calibrate_slurm(
    jobs: JobList,
    *,
    cluster: str,
    transport: object,
    inventory: Callable[[], InventorySnapshot],
    partition: str,
    account: str = "",
    repeat: int = 1,
    deadline_s: float | None = None,
    wait_idle_s: float = 120.0,
) -> Calibration:
    """``transport`` and ``inventory``: the cluster's Slurm backend's (``backend_for``), so the
    simulator starts from the inventory and limits exactly as the broker reads them."""
    if not isinstance(transport, CommandTransport):
        used = getattr(transport, "name", type(transport).__name__)
        raise NotCalibratable(f"{cluster}: calibration runs Slurm's commands; this cluster's transport is {used}")
    cycle = slurm_cycle(transport)
    result = Calibration(
        cluster=cluster,
        control_plane="slurm",
        partition=partition,
        job_list=jobs.name,
        cycle=cycle,
        started_at=runtime.now(),
        commit=_commit(),
    )

    def player(snapshot: InventorySnapshot, sim: SimulatedCluster) -> SlurmPlayer:
        gres_type = next(p.name.split("/", 1)[1] for p in snapshot.pools if p.name.startswith(f"{partition}/"))
        return SlurmPlayer(transport, partition=partition, account=account, gres_type=_typed(gres_type))

    def warm_up() -> None:
        SlurmPlayer(transport, partition=partition).warm_up(jobs.warmup)

    side = slurm_side(partition, account)
    return _repeat(
        result,
        jobs,
        side,
        player,
        inventory=inventory,
        repeat=repeat,
        deadline_s=deadline_s,
        wait_idle_s=wait_idle_s,
        prepare=warm_up,
    )


KUEUE_CYCLE = SchedulerCycle(
    # Kueue admits on events, not on a period; the player samples every second and the API's
    # timestamps are whole seconds, so starts within 2 s of each other are tied
    words="event-driven admission, 1 s samples, whole-second timestamps",
    cycle_s=2.0,
)


VOLCANO_CYCLE = SchedulerCycle(
    # vc-scheduler runs a session every schedulePeriod (1 s, its default; the Helm chart's
    # configuration as CI starts it); the player samples every second and the API's
    # timestamps are whole seconds
    words="schedulePeriod=1s, 1 s samples, whole-second timestamps",
    cycle_s=2.0,
)


def calibrate_kube(
    jobs: JobList,
    *,
    cluster: str,
    backend: KubeSide,
    inventory: Callable[[], InventorySnapshot],
    namespace: str,
    queue: str,
    local_queue: str,
    pool: str = "",
    repeat: int = 1,
    deadline_s: float | None = None,
    wait_idle_s: float = 120.0,
) -> Calibration:
    """A Kueue or a Volcano calibration (the backend's ``kind`` says which).  ``backend`` and
    ``inventory``: the cluster's backend's; ``queue`` and ``local_queue``: the queues (in
    ``namespace``) of the broker's and the local jobs: Kueue's LocalQueues, Volcano's
    Queues; ``pool``, Volcano only: the GPU pool (of one model) the jobs ask for, idle when
    each repetition starts (Kueue's flavors are those the queues' quotas name)."""
    plane = backend.kind
    if plane not in _KUBE:
        raise NotCalibratable(f"{cluster}: a {plane} cluster cannot be calibrated (Kueue, Volcano)")
    cycle, start = _KUBE[plane]
    if jobs.warmup:
        raise NotCalibratable(f"{jobs.name}: warmup jobs give Slurm's fair share past use; {plane} has none")
    result = Calibration(
        cluster=cluster,
        control_plane=plane,
        partition=queue,
        local_queue=local_queue,
        pool=pool,
        job_list=jobs.name,
        cycle=cycle,
        started_at=runtime.now(),
        commit=_commit(),
    )

    def player(snapshot: InventorySnapshot, sim: SimulatedCluster) -> KubePlayer:
        return KubePlayer(
            backend, namespace=namespace, queue=queue, local_queue=local_queue, gpu_models=models(sim), start=start
        )

    side = side_for(plane, queue, local_queue, pool)
    return _repeat(
        result, jobs, side, player, inventory=inventory, repeat=repeat, deadline_s=deadline_s, wait_idle_s=wait_idle_s
    )


_KUBE = {"kueue": (KUEUE_CYCLE, kueue_start), "volcano": (VOLCANO_CYCLE, volcano_start)}


@dataclass(frozen=True)
class SimSide:
    """How one control plane's simulator side is built from an inventory and played."""

    build: Callable[[InventorySnapshot], SimulatedCluster]
    play: Callable[[SimulatedCluster, JobList, list[float]], Played]


def slurm_side(partition: str, account: str = "") -> SimSide:
    return SimSide(
        build=lambda snap: simulator_for(snap, partition),
        play=lambda sim, jobs, samples: play(sim, jobs, samples, account=account or "calibration"),
    )


def kueue_side(queue: str, local_queue: str) -> SimSide:
    return SimSide(
        build=lambda snap: simulator_for_kueue(snap, [queue, local_queue]),
        play=lambda sim, jobs, samples: play(sim, jobs, samples, queue=queue, local_queue=local_queue),
    )


def volcano_side(queue: str, local_queue: str, pool: str) -> SimSide:
    return SimSide(
        build=lambda snap: simulator_for_volcano(snap, [queue, local_queue], pool),
        play=lambda sim, jobs, samples: play(sim, jobs, samples, queue=queue, local_queue=local_queue),
    )


def side_for(plane: str, queue: str, local_queue: str, pool: str = "") -> SimSide:
    """The simulator side of a control plane: ``queue`` is Slurm's partition, Kueue's or
    Volcano's queue of the broker's jobs; ``local_queue`` that of the local jobs."""
    if plane == "kueue":
        return kueue_side(queue, local_queue)
    if plane == "volcano":
        return volcano_side(queue, local_queue, pool)
    return slurm_side(queue)


def side_of(recorded: dict[str, Any]) -> SimSide:
    """The simulator side a recorded calibration was played with."""
    queue = recorded["partition"]
    local = recorded.get("local_queue") or queue
    return side_for(str(recorded.get("control_plane")), queue, local, recorded.get("pool", ""))


class _Player(Protocol):
    def play(self, jobs: JobList, *, deadline_s: float) -> Played: ...


def _repeat(
    result: Calibration,
    jobs: JobList,
    side: SimSide,
    player: Callable[[InventorySnapshot, SimulatedCluster], _Player],
    *,
    inventory: Callable[[], InventorySnapshot],
    repeat: int,
    deadline_s: float | None,
    wait_idle_s: float,
    prepare: Callable[[], None] = lambda: None,
) -> Calibration:
    """Each repetition: what the list runs first (``prepare``: Slurm's warm-up jobs), the
    inventory as the backend reads it once idle, the real side played, the simulator built
    from that inventory played at the real side's samples."""
    for _ in range(repeat):
        prepare()
        snapshot, sim = _idle(inventory, side.build, wait_idle_s)
        _has_mig(jobs, sim)
        result.inventory = result.inventory or inventory_json(snapshot)
        real = player(snapshot, sim).play(jobs, deadline_s=deadline_s or jobs.span_s + 120.0)
        simulated = side.play(sim, jobs, sorted(real.reasons))
        agreement = compare(real, simulated, cycle_s=result.cycle.cycle_s)
        result.repetitions.append(Repetition(real, simulated, agreement))
    return result


def _has_mig(jobs: JobList, sim: SimulatedCluster) -> None:
    """A list's MIG jobs need nodes of their profile among the calibration's: refused before
    anything is submitted, naming what is missing."""
    wanted = {j.mig_profile for j in jobs.jobs if j.mig_profile}
    missing = sorted(wanted - {n.partitioning for n in sim.nodes})
    if missing:
        raise NotCalibratable(
            f"{jobs.name}: jobs ask for MIG profile(s) {', '.join(missing)}; "
            f"no node of the calibration's partition or queues has them"
        )


def _idle(
    inventory: Callable[[], InventorySnapshot], build: Callable[[InventorySnapshot], SimulatedCluster], wait_s: float
) -> tuple[InventorySnapshot, SimulatedCluster]:
    """The inventory once none of the calibration's GPUs is allocated (a job that just ended
    frees its GPUs a moment after it leaves the queue), and the simulator built from it;
    after ``wait_s`` the refusal names the busy nodes."""
    deadline = time.monotonic() + wait_s
    while True:
        snapshot = inventory()
        try:
            return snapshot, build(snapshot)
        except NotCalibratable:
            if time.monotonic() >= deadline:
                raise
        time.sleep(2.0)


def _typed(gres_type: str) -> str:
    return "" if gres_type == "gpu" else gres_type


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if out.returncode != 0:
        return ""
    try:  # a run from a tree with changes not committed says so
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        dirty = ""
    return out.stdout.strip() + ("+dirty" if dirty else "")


def resimulate(recorded: dict[str, Any], jobs: JobList) -> dict[str, Any]:
    """A recorded calibration with its simulator side played again by this version of the
    simulator, against the same real runs (the real side is not run again): how a fix to
    the simulator moves the agreement, on the evidence that found the difference."""
    snapshot = inventory_from_json(recorded["inventory"])
    out = dict(recorded, resimulated_at=_commit(), repetitions=[])
    side = side_of(recorded)
    for rep in recorded["repetitions"]:
        real = Played.from_json(rep["real"])
        simulated = side.play(side.build(snapshot), jobs, sorted(real.reasons))
        agreement = compare(real, simulated, cycle_s=float(recorded["cycle_s"]))
        out["repetitions"].append(
            {"agreement": agreement.to_json(), "real": rep["real"], "simulated": simulated.to_json()}
        )
    return out
