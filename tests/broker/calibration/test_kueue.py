"""The Kueue calibration: the simulator built from the queues' quotas as the Kueue backend
reports them, and the player's reading of Jobs and Workloads (a fake API, its objects
shaped as real Kueue writes them)."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.backends.base import DestinationJob, JobState, Reason
from broker.calibration.jobs import load, parse
from broker.calibration.kube import KubePlayer
from broker.calibration.simulated import NotCalibratable, play, simulator_for_kueue
from broker.cluster_report import InventorySnapshot, NodeInventory, PoolInventory
from broker.local_limits import GroupQuota, LocalLimits
from tests.broker.calibration.helpers import FakeKubeApi

KUEUE_SLICE = Path(__file__).parent / "data" / "kueue-contended-16gpu.json"
MIG_SLICE = Path(__file__).parent / "data" / "kueue-mig-7slices.json"
STEADY_SLICE = Path(__file__).parent / "data" / "kueue-steady-16gpu.json"


def _inventory(allocated: int = 0) -> InventorySnapshot:
    def pool(name: str, model: str, sizes: list[int]) -> PoolInventory:
        nodes = tuple(NodeInventory(name=f"{name}-{i}", gpu_model=model, gpu_memory_gb=80, gpus_total=n,
                                    gpus_allocatable=n, gpus_allocated=allocated if i == 0 else 0)
                      for i, n in enumerate(sizes))
        return PoolInventory(name=name, gpu_model=model, gpu_memory_gb=80, partitioning="whole", owner="kueue",
                             nodes=nodes)
    quotas = []
    for flavor in ("a100", "h100"):
        quotas += [GroupQuota(f"ClusterQueue calib-cq flavor {flavor}", pool=flavor, scope="calib", limit_gpus=8,
                              borrow_gpus=4, preemption="LowerPriority"),
                   GroupQuota(f"ClusterQueue calib-lend flavor {flavor}", pool=flavor, scope="calib-local",
                              limit_gpus=8, borrow_gpus=4)]
        quotas += [GroupQuota(f"cohort calib flavor {flavor}", pool=flavor, scope=s, limit_gpus=8)
                   for s in ("calib", "calib-local")]
    quotas.append(GroupQuota("ClusterQueue gpu-cq flavor mig", pool="mig", limit_gpus=7))
    return InventorySnapshot(cluster="k", taken_at=datetime(2026, 12, 4, tzinfo=UTC),
                             pools=(pool("a100", "A100", [4, 4]), pool("h100", "H100", [8]), pool("mig", "A30", [7])),
                             limits=LocalLimits(quotas=tuple(quotas)))


def test_the_simulator_has_the_queues_flavors_their_quotas_and_preemption():
    sim = simulator_for_kueue(_inventory(), ["calib", "calib-local"])
    assert [(n.name, n.pool) for n in sim.nodes] == [("a100-0", "a100"), ("a100-1", "a100"), ("h100-0", "h100")]
    mine = {(q.source, q.pool): (q.limit, q.nominal, q.preemption) for q in sim.queue_quotas}
    assert mine[("ClusterQueue calib-cq flavor a100", "a100")] == (8, 4, "LowerPriority")
    assert mine[("cohort calib flavor h100", "h100")] == (8, 8, "")
    assert sim.queueing == "backfill"  # BestEffortFIFO


def test_queues_without_quota_or_busy_flavors_are_refused_saying_which():
    with pytest.raises(NotCalibratable, match="queue\\(s\\) nope: no GPU quota of k is fed by them"):
        simulator_for_kueue(_inventory(), ["calib", "nope"])
    with pytest.raises(NotCalibratable, match=r"flavors a100, h100 are not idle: a100-0 \(3 of 4 GPUs\), h100-0 \(3 of 8 GPUs\) allocated"):
        simulator_for_kueue(_inventory(allocated=3), ["calib", "calib-local"])


@pytest.mark.parametrize(("path", "high"), [(KUEUE_SLICE, ["h13", "h25", "h32"]), (STEADY_SLICE, ["h11", "h16", "h29"])],
                         ids=["first", "steady"])
def test_the_shipped_kueue_slices_borrow_preempt_and_are_contended_on_the_simulator(path, high):
    jobs = load(path)
    assert 30 <= len(jobs.jobs) <= 40 and sum(j.local for j in jobs.jobs) >= 0.2 * len(jobs.jobs)
    assert [j.name for j in jobs.jobs if j.priority == "high"] == high
    played = play(simulator_for_kueue(_inventory(), ["calib", "calib-local"]), jobs,
                  [float(t) for t in range(240)], queue="calib", local_queue="calib-local")
    waited = [o for o in played.jobs.values() if (o.started_s or 1e9) - o.submitted_s >= 2.0]
    assert len(waited) >= 0.3 * len(jobs.jobs)
    assert sum(o.preempted for o in played.jobs.values()) >= 1
    assert {o.state for o in played.jobs.values()} >= {"completed", "cancelled", "timeout"}
    # the broker's queue runs past its nominal 4 + 4 GPUs at some start: it borrowed
    mine = {j.name: j.gpus for j in jobs.jobs if not j.local}
    starts = [o.started_s for o in played.jobs.values() if o.started_s is not None]
    assert max(sum(g for n, g in mine.items() if (o := played.jobs[n]).started_s is not None
                   and o.started_s <= at and (o.ended_s is None or o.ended_s > at)) for at in starts) > 8


def test_a_priority_outside_the_brokers_words_is_refused_naming_the_job():
    with pytest.raises(ValueError, match=r"job 1 \(a\): priority must be one of low, normal, high, not 'urgent'"):
        parse({"jobs": [{"name": "a", "at_s": 0, "gpus_per_worker": 1, "run_s": 5, "time_limit_min": 1,
                         "priority": "urgent"}]})


class FakeKueue(FakeKubeApi):
    """Jobs and Workloads as the API lists them; each sample moves the scripted story on."""

    kind = "kueue"

    def __init__(self) -> None:
        super().__init__()
        self.workloads: dict[str, dict] = {}
        self.submitted: list[tuple[str, str, list[str]]] = []

    def submit(self, spec, workload_id, identity):
        name = workload_id
        self.jobs[name] = {"metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"}}
        self.workloads[name] = {"metadata": {"ownerReferences": [{"uid": f"uid-{name}"}]}, "status": {}}
        self.submitted.append((name, identity.queue, list(spec.gpu_models)))
        return f"team/{name}"

    def calibration_jobs(self, namespace, project):
        return [(job, self.workloads.get(name)) for name, job in self.jobs.items()]

    def describe(self, job, wl):
        conds = {c["type"]: c for c in (wl or {}).get("status", {}).get("conditions", [])}
        if "Finished" in conds:
            return DestinationJob(job_id="x", workload_id=None, state=JobState.COMPLETED,
                                  ended_at=datetime.fromisoformat(conds["Finished"]["lastTransitionTime"]))
        if conds.get("PodsReady", {}).get("status") == "True":
            return DestinationJob(job_id="x", workload_id=None, state=JobState.RUNNING)
        return DestinationJob(job_id="x", workload_id=None, state=JobState.PENDING, reason=Reason.CAPACITY,
                              raw_reason="couldn't assign flavors to pod set main: insufficient unused quota")


def _cond(kind: str, at: float, status: str = "True", reason: str = "") -> dict:
    stamp = datetime.fromtimestamp(at, tz=UTC).isoformat()
    return {"type": kind, "status": status, "reason": reason, "lastTransitionTime": stamp}


def test_the_player_reads_starts_from_pods_ready_counts_preemptions_and_cancels_what_is_left():
    api, now = FakeKueue(), [1000.0]
    jobs = parse({"name": "t", "jobs": [
        {"name": "a", "at_s": 0, "gpus_per_worker": 4, "run_s": 5, "time_limit_min": 1},
        {"name": "b", "at_s": 1, "gpus_per_worker": 2, "run_s": 5, "time_limit_min": 1, "local": True},
        {"name": "c", "at_s": 2, "gpus_per_worker": 2, "run_s": 5, "time_limit_min": 1, "cancel_at_s": 3}]})
    player = KubePlayer(api, namespace="team", queue="calib", local_queue="calib-local", gpu_models=["A100"],
                         clock=lambda: now[0], sleep=lambda s: _step(api, player, now, s))
    played = player.play(jobs, deadline_s=30)
    a, b, c = played.jobs["a"], played.jobs["b"], played.jobs["c"]
    assert [q for _, q, _ in api.submitted] == ["calib", "calib-local", "calib"]
    assert api.submitted[0][2] == ["A100"]
    assert a.started_s == 1.0 and a.preempted == 1 and a.state == "completed" and a.ended_s == 9.0
    assert b.started_s is None and b.state == "pending"  # never started within the deadline
    assert c.state == "cancelled" and c.started_s is None and c.ended_s is None
    assert played.reasons[1.0] == {"b": "capacity"} or "b" in played.reasons[2.0]
    assert any("insufficient unused quota" in n for n in played.notes)
    assert f"team/{player.tag}-b" in api.cancelled  # nothing is left behind


def _step(api: FakeKueue, player: KubePlayer, now: list[float], seconds: float) -> None:
    now[0] += max(seconds, 0.5)
    t = now[0] - 1000.0
    wl = api.workloads.get(f"{player.tag}-a")
    if wl is None:
        return
    conds = []
    if t >= 1:
        conds = [_cond("PodsReady", 1001.0)]
    if t >= 4:  # evicted for a higher-priority job, ready again at 6, finished at 9
        conds = [_cond("PodsReady", 1001.0, "False"), _cond("Evicted", 1004.0, reason="Preempted")]
    if t >= 6:
        conds = [_cond("PodsReady", 1006.0), _cond("Evicted", 1004.0, reason="Preempted")]
    if t >= 9:
        conds.append(_cond("Finished", 1009.0))
    wl["status"]["conditions"] = conds


def _with_mig(snap: InventorySnapshot) -> InventorySnapshot:
    """The inventory with the calibration queues' quota on a MIG flavor, whose pool the Kueue
    backend names "<flavor>/<profile>" (mig-0: 7 slices of 1g.5gb)."""
    node = NodeInventory(name="mig-0", gpu_model="A100-40GB", gpu_memory_gb=5, gpus_total=7, gpus_allocatable=7,
                         gpus_allocated=0, partitioning="1g.5gb")
    pool = PoolInventory(name="a100-mig/1g.5gb", gpu_model="A100-40GB", gpu_memory_gb=5, partitioning="1g.5gb",
                         owner="kueue", nodes=(node,))
    quotas = [GroupQuota("ClusterQueue calib-cq flavor a100-mig", pool="a100-mig", scope="calib", limit_gpus=7,
                         borrow_gpus=3, preemption="LowerPriority"),
              GroupQuota("ClusterQueue calib-lend flavor a100-mig", pool="a100-mig", scope="calib-local",
                         limit_gpus=7, borrow_gpus=4)]
    quotas += [GroupQuota("cohort calib flavor a100-mig", pool="a100-mig", scope=s, limit_gpus=7)
               for s in ("calib", "calib-local")]
    return InventorySnapshot(cluster=snap.cluster, taken_at=snap.taken_at, pools=(*snap.pools, pool),
                             limits=LocalLimits(quotas=(*snap.limits.quotas, *quotas)))


def test_a_mig_flavor_s_slices_are_in_the_simulator_under_their_flavor():
    sim = simulator_for_kueue(_with_mig(_inventory()), ["calib", "calib-local"])
    mig = [n for n in sim.nodes if n.name == "mig-0"]
    assert [(n.pool, n.partitioning, n.gpus) for n in mig] == [("a100-mig", "1g.5gb", 7)]


def test_the_shipped_mig_slice_runs_on_the_slices_borrows_and_preempts_on_the_simulator():
    jobs = load(MIG_SLICE)
    assert {j.mig_profile for j in jobs.jobs} == {"1g.5gb"}
    assert sum(j.local for j in jobs.jobs) >= 4 and any(j.workers > 1 for j in jobs.jobs)
    sim = simulator_for_kueue(_with_mig(_inventory()), ["calib", "calib-local"])
    played = play(sim, jobs, [float(t) for t in range(120)], queue="calib", local_queue="calib-local")
    started = {n: o for n, o in played.jobs.items() if o.started_s is not None}
    assert {o.nodes for o in started.values()} == {"mig-0"}  # slices, never a whole GPU's node
    assert sum(o.preempted for o in played.jobs.values()) >= 1
    assert played.jobs["m10"].state == "timeout" and played.jobs["m06"].state == "cancelled"
    assert sum(1 for o in played.jobs.values() if o.started_s is not None and o.started_s > o.submitted_s) >= 5


def test_a_mig_list_on_queues_without_mig_nodes_is_refused_before_anything_is_submitted():
    jobs = load(MIG_SLICE)
    submitted = []

    class Never:
        def play(self, *a, **k):
            submitted.append(1)

    from broker.calibration.run import Calibration, KUEUE_CYCLE, _repeat, kueue_side

    result = Calibration(cluster="k", control_plane="kueue", partition="calib", job_list=jobs.name,
                         cycle=KUEUE_CYCLE, started_at=datetime(2026, 12, 5, tzinfo=UTC), commit="")
    with pytest.raises(NotCalibratable, match=r"jobs ask for MIG profile\(s\) 1g.5gb; no node of the calibration"):
        _repeat(result, jobs, kueue_side("calib", "calib-local"), lambda snap, sim: Never(),
                inventory=_inventory, repeat=1, deadline_s=None, wait_idle_s=0)
    assert submitted == []
