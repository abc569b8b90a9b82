"""The fleet simulator: local semantics of each flavor, the clock, faults, the registry."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from broker import runtime

from broker.backends.base import (
    Backend, JobState, ProjectIdentity, Reason, Rejected, Unavailable)
from broker.backends.simulator import (
    NodeGroup, Partition, SimClock, SimulatedCluster, SimulatorBackend, SimulatorFleet,
    get_simulated_cluster, set_duration)
from broker.spec import WorkloadSpec
from broker.backends.sim.admission import VOLCANO_SESSION_S

ORIGIN = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)
IDENT = ProjectIdentity(tenant="acme", project="vision", slurm_account="vision",
                        k8s_namespace="vision")


@pytest.fixture
def fleet():
    sim = SimulatorFleet.reset(clock=SimClock(origin=ORIGIN))
    yield sim
    SimulatorFleet.reset()


def spec(name: str = "job", gpus: int = 1, workers: int = 1, **kw) -> WorkloadSpec:
    kw.setdefault("gpu_models", ("A100",))
    return WorkloadSpec(project="vision", name=name, command="python train.py",
                        gpus_per_worker=gpus, workers=workers, **kw)


def a100(count: int = 2, gpus: int = 8, **kw) -> NodeGroup:
    return NodeGroup(count=count, gpu_model="A100", gpu_memory_gb=80, gpus_per_node=gpus, **kw)


def cluster(fleet: SimulatorFleet, flavor: str, *groups: NodeGroup, name: str = "c1",
            **kw) -> tuple[SimulatedCluster, SimulatorBackend]:
    sim = fleet.add_cluster(name, flavor, node_groups=groups or (a100(),), **kw)
    return sim, SimulatorBackend(name)


def submit(backend: SimulatorBackend, wid: str, s: WorkloadSpec | None = None,
           seconds: float | None = None) -> str:
    if seconds is not None:
        set_duration(wid, seconds)
    return backend.submit(s or spec(), wid, IDENT)


# --- the clock ------------------------------------------------------------------------

def test_manual_clock_moves_only_when_told():
    clock = SimClock(origin=ORIGIN)
    assert clock.now() == ORIGIN
    assert clock.advance(90) == 90
    assert clock.now() == ORIGIN + timedelta(seconds=90)
    clock.advance_to(30)  # never backwards
    assert clock.seconds == 90
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_naive_origin_is_taken_as_utc():
    assert SimClock(origin=datetime(2026, 1, 1)).now().tzinfo is timezone.utc


def test_wall_clock_follows_real_time_and_scales_durations(fleet):
    instant = [ORIGIN]
    with runtime.override(now=lambda: instant[0]):  # the broker's clock, moved by hand: no wall clock
        SimulatorFleet.reset(clock=SimClock(follow_wall=True, time_scale=18_000))
        sim, backend = cluster(SimulatorFleet.instance(), "slurm")
        job_id = backend.submit(spec(time_limit_minutes=60), "wl-wall", IDENT)  # runs 30 min
        assert backend.status([job_id])[job_id].state is JobState.RUNNING
        instant[0] = ORIGIN + timedelta(seconds=0.09)  # 27 simulated minutes: still running
        assert backend.status([job_id])[job_id].state is JobState.RUNNING
        instant[0] = ORIGIN + timedelta(seconds=0.11)  # 30 min / 18000 = 0.1 s of the broker's time
        job = backend.status([job_id])[job_id]
    assert job.state is JobState.COMPLETED
    assert job.started_at == ORIGIN  # the broker's instant of the submission, to the microsecond
    assert job.ended_at == ORIGIN + timedelta(seconds=0.1)


# --- running and finishing ------------------------------------------------------------

def test_backend_satisfies_the_protocol(fleet):
    _, backend = cluster(fleet, "slurm")
    assert isinstance(backend, Backend)
    assert backend.kind == "simulator" and backend.cluster == "c1"


def test_job_runs_and_finishes_when_the_clock_advances(fleet):
    sim, backend = cluster(fleet, "slurm")
    job_id = submit(backend, "wl-1", spec(gpus=4), seconds=600)
    job = backend.status([job_id])[job_id]
    assert job.state is JobState.RUNNING and job.started_at == ORIGIN
    assert job.gpus == 4 and len(job.nodes) == 1
    fleet.advance(599)
    assert backend.status([job_id])[job_id].state is JobState.RUNNING
    fleet.advance(1)
    job = backend.status([job_id])[job_id]
    assert job.state is JobState.COMPLETED
    assert job.ended_at == ORIGIN + timedelta(seconds=600)
    assert backend.inventory().pools[0].gpus_allocated == 0


def test_default_duration_is_a_fraction_of_the_time_limit(fleet):
    _, backend = cluster(fleet, "kueue")
    job_id = backend.submit(spec(time_limit_minutes=60), "wl-1", IDENT)
    fleet.advance(30 * 60 - 1)
    assert backend.status([job_id])[job_id].state is JobState.RUNNING
    fleet.advance(1)
    assert backend.status([job_id])[job_id].state is JobState.COMPLETED


def test_a_job_longer_than_its_limit_is_killed_at_the_limit(fleet):
    _, backend = cluster(fleet, "slurm")
    job_id = submit(backend, "wl-1", spec(time_limit_minutes=10), seconds=3600)
    fleet.advance(3600)
    job = backend.status([job_id])[job_id]
    assert job.state is JobState.FAILED and job.raw_reason == "TIMEOUT"
    assert job.ended_at == ORIGIN + timedelta(minutes=10)


def test_queued_job_starts_the_instant_room_frees(fleet):
    _, backend = cluster(fleet, "slurm", a100(count=1))
    first = submit(backend, "wl-1", spec(gpus=8), seconds=100)
    second = submit(backend, "wl-2", spec(gpus=8), seconds=50)
    fleet.advance(1000)  # one look long after both ended: the replay is exact anyway
    jobs = backend.status([first, second])
    assert jobs[second].started_at == ORIGIN + timedelta(seconds=100)
    assert jobs[second].ended_at == ORIGIN + timedelta(seconds=150)


def test_usage_is_gpus_times_seconds(fleet):
    _, backend = cluster(fleet, "kueue")
    done = submit(backend, "wl-1", spec(gpus=4, workers=2), seconds=900)
    running = submit(backend, "wl-2", spec(gpus=2), seconds=7200)
    fleet.advance(1200)
    records = {r.job_id: r for r in backend.usage(ORIGIN)}
    assert records[done].gpu_seconds == 8 * 900 and records[done].gpus == 8
    assert records[done].end == ORIGIN + timedelta(seconds=900)
    assert records[done].workload_id == "wl-1" and records[done].account == "vision"
    assert records[done].gpu_model == "A100" and records[done].source == "simulator"
    assert records[running].end is None and records[running].gpu_seconds == 2 * 1200
    later = {r.job_id for r in backend.usage(ORIGIN + timedelta(seconds=1000))}
    assert later == {running}


# --- Slurm semantics ------------------------------------------------------------------

def test_slurm_reasons_resources_priority_and_qos(fleet):
    sim, backend = cluster(fleet, "slurm", a100(count=2),
                           partitions=[Partition("gpu", max_gpus_per_job=8, default=True)])
    submit(backend, "wl-fill-1", spec(gpus=6), seconds=600)
    submit(backend, "wl-fill-2", spec(gpus=6), seconds=600)
    head = submit(backend, "wl-head", spec(gpus=4))
    behind = submit(backend, "wl-behind", spec(gpus=1))  # would fit: no backfill
    qos = submit(backend, "wl-qos", spec(gpus=6, workers=2))
    jobs = backend.status([head, behind, qos])
    assert (jobs[head].reason, jobs[head].raw_reason) == (Reason.CAPACITY, "Resources")
    assert (jobs[behind].reason, jobs[behind].raw_reason) == (Reason.CAPACITY, "Priority")
    assert (jobs[qos].reason, jobs[qos].raw_reason) == (Reason.POLICY, "QOSMaxGRESPerJob")
    fleet.advance(600)
    jobs = backend.status([head, behind, qos])
    assert jobs[head].state is JobState.RUNNING and jobs[behind].state is JobState.RUNNING
    assert jobs[qos].state is JobState.PENDING and jobs[qos].reason is Reason.POLICY


def test_slurm_policy_hold_does_not_block_the_queue(fleet):
    _, backend = cluster(fleet, "slurm", partitions=[Partition("gpu", 4, default=True)])
    held = submit(backend, "wl-1", spec(gpus=8))
    ok = submit(backend, "wl-2", spec(gpus=2))
    jobs = backend.status([held, ok])
    assert jobs[held].reason is Reason.POLICY and jobs[ok].state is JobState.RUNNING


def test_slurm_gives_each_worker_a_node_of_its_own_where_kueue_packs_them(fleet):
    # the Slurm backend asks --nodes=workers with one task a node: three workers of 2 GPUs
    # need three nodes, which a two-node partition never has
    _, slurm = cluster(fleet, "slurm", a100(count=2))
    with pytest.raises(Rejected, match="requested node configuration is not available"):
        slurm.submit(spec(gpus=2, workers=3), "wl-3x2", IDENT)
    two = submit(slurm, "wl-2x2", spec(gpus=2, workers=2))
    assert slurm.status([two])[two].state is JobState.RUNNING
    _, kueue = cluster(fleet, "kueue", a100(count=2), name="k")
    three = submit(kueue, "wl-3x2", spec(gpus=2, workers=3))
    assert kueue.status([three])[three].state is JobState.RUNNING


def test_slurm_rejects_what_no_node_could_hold(fleet):
    _, backend = cluster(fleet, "slurm")
    with pytest.raises(Rejected) as exc:
        backend.submit(spec(gpus=9), "wl-1", IDENT)
    assert "Requested node configuration is not available" in exc.value.raw
    with pytest.raises(Rejected):
        backend.submit(spec(gpu_models=("H100",)), "wl-2", IDENT)
    bad_queue = ProjectIdentity("acme", "vision", queue="nope")
    with pytest.raises(Rejected) as exc:
        backend.submit(spec(), "wl-3", bad_queue)
    assert "Invalid partition" in exc.value.raw
    assert backend.active_jobs() == []


def test_slurm_picks_the_partition_whose_nodes_match(fleet):
    sim, backend = cluster(fleet, "slurm", a100(count=1, partition="gpu"),
                           a100(count=1, gpus=4, partitioning="1g.10gb", partition="mig"),
                           partitions=[Partition("gpu", default=True), Partition("mig", 7)])
    job_id = submit(backend, "wl-1", spec(gpus=3, mig_profile="1g.10gb"))
    assert sim.job(job_id).partition == "mig"
    assert backend.status([job_id])[job_id].state is JobState.RUNNING


def test_unhealthy_nodes_mean_unavailable_not_capacity(fleet):
    sim, backend = cluster(fleet, "slurm", a100(count=1))
    sim.set_node(sim.nodes[0].name, healthy=False)
    job_id = submit(backend, "wl-1")
    job = backend.status([job_id])[job_id]
    assert job.reason is Reason.UNAVAILABLE and job.raw_reason.startswith("ReqNodeNotAvail")
    sim.set_node(sim.nodes[0].name, healthy=True)
    assert backend.status([job_id])[job_id].state is JobState.RUNNING


# --- Kueue semantics ------------------------------------------------------------------

def test_kueue_beyond_maximum_capacity_is_a_policy_hold(fleet):
    _, backend = cluster(fleet, "kueue", a100(count=4, quota=16))
    job_id = submit(backend, "wl-1", spec(gpus=8, workers=3))
    job = backend.status([job_id])[job_id]
    assert job.state is JobState.PENDING and job.reason is Reason.POLICY
    assert job.raw_reason.startswith("couldn't assign flavors to pod set main: ")
    assert "in flavor a100-80gb" in job.raw_reason
    assert "current podset request (24) > maximum capacity (16)" in job.raw_reason


def test_kueue_insufficient_unused_quota_is_capacity(fleet):
    _, backend = cluster(fleet, "kueue", a100(count=4, quota=16))
    submit(backend, "wl-1", spec(gpus=8, workers=1), seconds=600)
    submit(backend, "wl-2", spec(gpus=4, workers=1), seconds=600)
    waiting = submit(backend, "wl-3", spec(gpus=8))
    job = backend.status([waiting])[waiting]
    assert job.reason is Reason.CAPACITY
    assert job.raw_reason == ("couldn't assign flavors to pod set main: insufficient unused "
                              "quota for nvidia.com/gpu in flavor a100-80gb, 4 more needed")
    fleet.advance(600)
    assert backend.status([waiting])[waiting].state is JobState.RUNNING


def test_kueue_without_a_matching_flavor_is_policy(fleet):
    _, backend = cluster(fleet, "kueue")
    job_id = submit(backend, "wl-1", spec(gpu_models=("H100",)))
    job = backend.status([job_id])[job_id]
    assert job.reason is Reason.POLICY and "unavailable in ClusterQueue" in job.raw_reason


def test_kueue_strict_fifo_blocks_later_jobs_of_the_same_flavor_only(fleet):
    l4 = NodeGroup(count=1, gpu_model="L4", gpu_memory_gb=24, gpus_per_node=4)
    _, backend = cluster(fleet, "kueue", a100(count=1), l4)
    submit(backend, "wl-fill", spec(gpus=6), seconds=600)
    head = submit(backend, "wl-head", spec(gpus=4))
    behind = submit(backend, "wl-behind", spec(gpus=1))
    other = submit(backend, "wl-l4", spec(gpus=1, gpu_models=("L4",)))
    jobs = backend.status([head, behind, other])
    assert jobs[head].reason is Reason.CAPACITY
    assert jobs[behind].reason is Reason.CAPACITY and "StrictFIFO" in jobs[behind].raw_reason
    assert jobs[other].state is JobState.RUNNING


def test_priority_orders_the_queue(fleet):
    _, backend = cluster(fleet, "kueue", a100(count=1))
    submit(backend, "wl-fill", spec(gpus=8), seconds=100)
    normal = submit(backend, "wl-normal", spec(gpus=8), seconds=100)
    urgent = submit(backend, "wl-urgent", spec(gpus=8, priority="high"), seconds=100)
    fleet.advance(100)
    jobs = backend.status([normal, urgent])
    assert jobs[urgent].state is JobState.RUNNING and jobs[normal].state is JobState.PENDING


def test_kueue_with_volcano_gangs_reports_gang(fleet):
    _, backend = cluster(fleet, "kueue", a100(count=2), gang_scheduler="volcano")
    submit(backend, "wl-fill-1", spec(gpus=6), seconds=100)
    submit(backend, "wl-fill-2", spec(gpus=4), seconds=100)
    # quota has room (6 of 16 unused) but the free GPUs are split 2 + 4 across nodes
    gang = submit(backend, "wl-gang", spec(gpus=3, workers=2))
    job = backend.status([gang])[gang]
    assert job.reason is Reason.GANG and "1/2 tasks in gang unschedulable" in job.raw_reason


# --- Volcano semantics ----------------------------------------------------------------

def test_a_volcano_gang_is_inqueue_for_one_session_before_its_pods_can_run(fleet):
    _, backend = cluster(fleet, "volcano", a100(count=1))
    job_id = submit(backend, "wl-1", spec(gpus=2))
    job = backend.status([job_id])[job_id]
    assert (job.state, job.reason, job.raw_reason) == (JobState.PENDING, Reason.NONE, "PodGroup Inqueue")
    fleet.advance(VOLCANO_SESSION_S)
    job = backend.status([job_id])[job_id]
    assert job.state is JobState.RUNNING and job.started_at == ORIGIN + timedelta(seconds=VOLCANO_SESSION_S)


def test_volcano_gang_is_all_or_nothing(fleet):
    sim, backend = cluster(fleet, "volcano", a100(count=4))
    for i in range(3):
        submit(backend, f"wl-fill-{i}", spec(gpus=8), seconds=300)
    gang = submit(backend, "wl-gang", spec(gpus=8, workers=4), seconds=300)
    fleet.advance(VOLCANO_SESSION_S)
    job = backend.status([gang])[gang]
    assert job.state is JobState.PENDING and job.reason is Reason.GANG
    assert job.raw_reason.startswith("NotEnoughResources: 3/4 tasks in gang unschedulable")
    assert sum(n.gpus_allocated for n in backend.inventory().pools[0].nodes) == 24
    fleet.advance(300)
    job = backend.status([gang])[gang]
    assert job.state is JobState.RUNNING and len(job.nodes) == 4  # one worker per node


def test_volcano_single_task_waiting_is_capacity(fleet):
    _, backend = cluster(fleet, "volcano", a100(count=1))
    submit(backend, "wl-fill", spec(gpus=8), seconds=300)
    job_id = submit(backend, "wl-1", spec(gpus=2))
    fleet.advance(VOLCANO_SESSION_S)
    assert backend.status([job_id])[job_id].reason is Reason.CAPACITY


def test_same_interconnect_keeps_a_gang_in_one_domain(fleet):
    groups = (a100(count=1, interconnect_domain="ib-1"), a100(count=1, interconnect_domain="ib-2"))
    _, backend = cluster(fleet, "volcano", *groups)
    split = submit(backend, "wl-1", spec(gpus=8, workers=2, same_interconnect=True))
    assert backend.status([split])[split].reason is Reason.UNAVAILABLE
    spread = submit(backend, "wl-2", spec(gpus=8, workers=2))
    fleet.advance(VOLCANO_SESSION_S)
    assert backend.status([spread])[spread].state is JobState.RUNNING


def test_mig_nodes_offer_slices_of_their_profile(fleet):
    _, backend = cluster(fleet, "kueue", a100(count=1, gpus=4, partitioning="1g.10gb"))
    pool = backend.inventory().pools[0]
    assert (pool.name, pool.partitioning, pool.gpus_total, pool.gpu_memory_gb) == (
        "a100-1g.10gb", "1g.10gb", 28, 10)
    mig = submit(backend, "wl-1", spec(gpus=7, mig_profile="1g.10gb"))
    whole = submit(backend, "wl-2", spec(gpus=1))
    jobs = backend.status([mig, whole])
    assert jobs[mig].state is JobState.RUNNING
    assert jobs[whole].reason is Reason.POLICY  # no whole-GPU flavor here


def test_gpu_class_and_memory_select_the_pool(fleet):
    a40 = NodeGroup(count=1, gpu_model="A100", gpu_memory_gb=40, gpus_per_node=8)
    sim, backend = cluster(fleet, "kueue", a40, a100(count=1))
    big = submit(backend, "wl-1", spec(gpu_models=(), gpu_class="a100", min_gpu_memory_gb=80))
    named = submit(backend, "wl-2", spec(gpu_models=(), gpu_class="a100-40gb"))
    assert sim.job(big).placement[0][0].startswith("a100-80gb")
    assert sim.job(named).placement[0][0].startswith("a100-40gb")


# --- inventory ------------------------------------------------------------------------

def test_inventory_snapshot(fleet):
    l4 = NodeGroup(count=2, gpu_model="L4", gpu_memory_gb=24, gpus_per_node=4)
    _, backend = cluster(fleet, "slurm", a100(count=2, interconnect_domain="ib-1"), l4)
    submit(backend, "wl-1", spec(gpus=8), seconds=1800)
    submit(backend, "wl-2", spec(gpus=8, workers=2))  # pending: 8 free GPUs left
    fleet.advance(900)
    snap = backend.inventory()
    assert snap.cluster == "c1" and snap.taken_at == ORIGIN + timedelta(seconds=900)
    assert [(p.name, p.gpu_model, p.owner) for p in snap.pools] == [
        ("a100-80gb", "A100", "slurm"), ("l4-24gb", "L4", "slurm")]
    a100_pool = snap.pools[0]
    assert (a100_pool.gpus_total, a100_pool.gpus_allocated, a100_pool.gpus_free) == (16, 8, 8)
    assert {n.interconnect_domain for n in a100_pool.nodes} == {"ib-1"}
    assert (snap.queue.pending_jobs, snap.queue.pending_gpus) == (1, 16)
    assert snap.queue.gpu_hours_per_hour == pytest.approx(8.0)


def test_owner_follows_the_flavor(fleet):
    for flavor in ("slurm", "kueue", "volcano"):
        _, backend = cluster(fleet, flavor, name=f"c-{flavor}")
        assert {p.owner for p in backend.inventory().pools} == {flavor}


# --- faults ---------------------------------------------------------------------------

def test_unreachable_cluster_raises_on_every_call(fleet):
    sim, backend = cluster(fleet, "slurm")
    job_id = submit(backend, "wl-1")
    sim.set_faults(unreachable=True)
    calls = [backend.inventory, lambda: backend.submit(spec(), "wl-2", IDENT),
             lambda: backend.find("wl-1"), lambda: backend.status([job_id]),
             backend.active_jobs, lambda: backend.cancel(job_id),
             lambda: list(backend.usage(ORIGIN))]
    for call in calls:
        with pytest.raises(Unavailable):
            call()
    sim.clear_faults()
    assert backend.find("wl-1").job_id == job_id
    assert len(sim.jobs()) == 1  # the refused submit created nothing


def test_slow_cluster_answers_late(fleet):
    sim, backend = cluster(fleet, "slurm")
    sim.set_faults(slow_s=0.2)
    waited: list[float] = []
    with runtime.override(sleep=waited.append):  # the runtime's sleep: no wall clock involved
        assert backend.inventory().cluster == "c1"
    assert waited == [0.2]


def test_slow_beyond_the_timeout_is_unavailable_and_bounded(fleet):
    sim, _ = cluster(fleet, "slurm")
    sim.set_faults(slow_s=10_000)
    assert sim.faults.slow_s <= 30  # bounded
    backend = SimulatorBackend("c1", timeout_s=0.1)
    waited: list[float] = []
    with runtime.override(sleep=waited.append), pytest.raises(Unavailable, match="no answer within 0.1s"):
        backend.inventory()
    assert waited == [0.1]  # the caller's timeout, not the fault's 30 s


def test_rejecting_cluster(fleet):
    sim, backend = cluster(fleet, "volcano")
    sim.set_faults(rejects="queue default is closed")
    with pytest.raises(Rejected) as exc:
        backend.submit(spec(), "wl-1", IDENT)
    assert exc.value.reason == "queue default is closed"
    assert "denied the request: queue default is closed" in exc.value.raw
    assert backend.find("wl-1") is None


def test_lost_job_vanishes_after_it_was_seen_running(fleet):
    sim, backend = cluster(fleet, "kueue")
    sim.set_faults(loses_job=True)
    lost = submit(backend, "wl-lost", spec(gpus=8), seconds=3600)
    kept = submit(backend, "wl-kept", spec(gpus=2), seconds=3600)  # one-shot switch
    assert backend.status([lost])[lost].state is JobState.RUNNING
    fleet.advance(60)
    assert lost not in backend.status([lost, kept])
    assert [j.job_id for j in backend.active_jobs()] == [kept]
    assert backend.find("wl-lost") is None
    assert backend.inventory().pools[0].gpus_allocated == 2
    assert {r.job_id for r in backend.usage(ORIGIN)} == {kept}
    assert sim.job(lost).lost  # the truth stays inspectable


def test_lost_job_that_nobody_watched_vanishes_at_its_end(fleet):
    sim, backend = cluster(fleet, "slurm")
    sim.set_faults(loses_job=True)
    lost = submit(backend, "wl-lost", seconds=100)
    fleet.advance(200)
    assert backend.status([lost]) == {} and backend.find("wl-lost") is None


def test_lost_reply_then_find_returns_the_same_job(fleet):
    sim, backend = cluster(fleet, "slurm")
    sim.set_faults(accepts_but_times_out=True)
    with pytest.raises(Unavailable):
        backend.submit(spec(), "wl-1", IDENT)
    found = backend.find("wl-1")
    assert found is not None and found.workload_id == "wl-1"
    assert [j.job_id for j in backend.active_jobs()] == [found.job_id]
    assert len(sim.jobs("wl-1")) == 1
    # one-shot: the next submit answers normally
    assert backend.submit(spec(), "wl-2", IDENT) == backend.find("wl-2").job_id


def test_cancel_is_confirmed(fleet):
    _, backend = cluster(fleet, "kueue", a100(count=1))
    running = submit(backend, "wl-1", spec(gpus=8), seconds=3600)
    pending = submit(backend, "wl-2", spec(gpus=8))
    fleet.advance(100)
    assert backend.cancel(pending) is True
    assert backend.cancel(running) is True
    jobs = backend.status([running, pending])
    assert {j.state for j in jobs.values()} == {JobState.CANCELLED}
    assert jobs[running].ended_at == ORIGIN + timedelta(seconds=100)
    assert backend.cancel(running) is True  # already ended: still confirmed
    assert backend.cancel("nope/none-1") is False
    assert backend.active_jobs() == [] and backend.inventory().pools[0].gpus_allocated == 0
    usage = {r.job_id: r.gpu_seconds for r in backend.usage(ORIGIN)}
    assert usage == {running: 800}


def test_a_foreign_job_is_listed_without_a_workload_id(fleet):
    sim, backend = cluster(fleet, "slurm")
    job_id = sim.inject_foreign_job(name="bitcoin", gpus_per_worker=4, account="intruder")
    orphans = [j for j in backend.active_jobs() if j.workload_id is None]
    assert [j.job_id for j in orphans] == [job_id]
    assert orphans[0].state is JobState.RUNNING and orphans[0].gpus == 4
    assert backend.inventory().pools[0].gpus_allocated == 4


def test_double_claimed_node_shows_two_owners(fleet):
    sim, backend = cluster(fleet, "kueue")
    node = sim.claim_node_by("slurm")
    owners = {n.owner for p in backend.inventory().pools for n in p.nodes if n.name == node}
    assert owners == {"kueue", "slurm"}
    other = sim.claim_node_by("volcano", sim.nodes[1].name)
    assert other == sim.nodes[1].name


# --- registry -------------------------------------------------------------------------

def test_backends_share_the_process_wide_cluster(fleet):
    cluster(fleet, "slurm", name="shared")
    job_id = SimulatorBackend("shared").submit(spec(), "wl-1", IDENT)
    assert SimulatorBackend("shared").find("wl-1").job_id == job_id
    assert get_simulated_cluster("shared").job(job_id).workload_id == "wl-1"


def test_unknown_cluster_is_unavailable_and_reset_forgets(fleet):
    cluster(fleet, "slurm", name="gone")
    SimulatorFleet.reset()
    with pytest.raises(KeyError):
        get_simulated_cluster("gone")
    with pytest.raises(Unavailable):
        SimulatorBackend("gone").inventory()


def test_clusters_share_one_clock(fleet):
    first, _ = cluster(fleet, "slurm", name="one")
    second, _ = cluster(fleet, "kueue", name="two")
    fleet.advance(42)
    assert first.inventory().taken_at == second.inventory().taken_at == ORIGIN + timedelta(
        seconds=42)
    with pytest.raises(ValueError):
        fleet.add(SimulatedCluster("alien", "slurm", node_groups=[a100()]))


def test_concurrent_submissions_are_all_kept(fleet):
    sim, _ = cluster(fleet, "kueue", a100(count=4))
    ids: list[str] = []

    def worker(n: int) -> None:
        for i in range(20):
            ids.append(SimulatorBackend("c1").submit(spec(), f"wl-{n}-{i}", IDENT))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 160 and len(sim.jobs()) == 160
    assert sum(n.allocated for n in sim.nodes) == 32  # never over-allocated


def test_trace_replay_with_absolute_times(fleet):
    _, backend = cluster(fleet, "volcano", a100(count=1))
    trace = [(0, "wl-a", 4, 500), (100, "wl-b", 8, 200), (150, "wl-c", 4, 100)]
    ids = {}
    for at, wid, gpus, seconds in trace:
        fleet.clock.advance_to(at)
        ids[wid] = submit(backend, wid, spec(gpus=gpus), seconds=seconds)
    fleet.clock.advance_to(2000)
    jobs = backend.status(list(ids.values()))
    starts = {wid: (jobs[jid].started_at - ORIGIN).total_seconds() for wid, jid in ids.items()}
    # strict FIFO: c waits behind b; each starts one Volcano session after its room is there
    assert starts == {"wl-a": 1, "wl-b": 501, "wl-c": 701}


def test_a_gang_that_must_share_a_host_runs_on_one_node_or_waits(fleet):
    # best fit alone would put one worker on the 2-GPU node and one on the 4-GPU node
    sim, backend = cluster(fleet, "kueue", a100(count=1, gpus=2), a100(count=1, gpus=4))
    together = submit(backend, "wl-1", spec(gpus=2, workers=2, topology_level="host"))
    fleet.advance(60)
    assert backend.status([together])[together].state is JobState.RUNNING
    assert [gpus for _, gpus in sim.job(together).placement] == [2, 2]
    assert len({node for node, _ in sim.job(together).placement}) == 1
    backend.cancel(together)
    # 2 x 2 GPUs on the 2-GPU node and 2 x 4 anywhere: no node holds either gang whole now
    fleet.advance(60)
    spread = submit(backend, "wl-2", spec(gpus=4, workers=2, topology_level="host"))
    fleet.advance(60)
    assert backend.status([spread])[spread].state is JobState.PENDING


def test_broken_gpus_fail_a_checking_job_on_that_node_and_go_unseen_by_one_that_does_not_check(fleet):
    sim, backend = cluster(fleet, "kueue", a100(count=1, gpus=8))
    node = sim.nodes[0].name
    sim.break_gpus(node)
    checked = submit(backend, "wl-1", spec(gpus=4, workers=2, gpu_check=True), seconds=600)
    fleet.advance(30)
    job = backend.status([checked])[checked]
    assert job.state is JobState.FAILED
    assert job.outcome.summary == f"GPU check failed on worker 0 (node {node})"
    assert (job.outcome.end_reason, job.outcome.exit_code) == ("GPU_CHECK", 86)
    plain = submit(backend, "wl-3", spec(gpus=4, workers=2), seconds=600)
    fleet.advance(30)
    assert backend.status([plain])[plain].state is JobState.RUNNING  # its scheduler counts the node healthy
