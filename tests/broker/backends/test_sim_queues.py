"""A simulated Kueue with ClusterQueues in a cohort: borrowing what the cohort lends, no
reclaim, and preemption of lower-priority jobs within a ClusterQueue (sim.queues)."""
from __future__ import annotations

from broker.backends.base import JobState, ProjectIdentity, Reason
from broker.backends.sim.clock import SimClock
from broker.backends.sim.cluster import SimulatedCluster
from broker.backends.sim.model import SimNode
from broker.backends.sim.queues import queue_quotas
from broker.local_limits import GroupQuota
from broker.spec import validate_spec


def _cluster(preemption: str = "LowerPriority") -> SimulatedCluster:
    """8 GPUs of one flavor; queue "mine" and queue "theirs" own 4 each, in one cohort."""
    quotas = [
        GroupQuota("ClusterQueue mine flavor a100", pool="a100", scope="mine", limit_gpus=8, borrow_gpus=4,
                   preemption=preemption),
        GroupQuota("ClusterQueue theirs flavor a100", pool="a100", scope="theirs", limit_gpus=8, borrow_gpus=4),
        GroupQuota("cohort c flavor a100", pool="a100", scope="mine", limit_gpus=8),
        GroupQuota("cohort c flavor a100", pool="a100", scope="theirs", limit_gpus=8),
    ]
    nodes = [SimNode(name="n1", gpu_model="A100", gpu_memory_gb=80, gpus=8, flavor="a100")]
    return SimulatedCluster("k", "kueue", nodes, clock=SimClock(), queueing="backfill",
                            queue_quotas=queue_quotas(quotas))


def _submit(sim: SimulatedCluster, name: str, gpus: int, queue: str, run_s: float, priority: str = "normal") -> str:
    spec = validate_spec({"project": "p", "name": name, "command": "sleep 1", "gpus_per_worker": gpus,
                          "gpu_models": ["A100"], "time_limit_minutes": 60, "priority": priority})
    sim.runtimes.set(name, run_s)
    return sim.submit(spec, name, ProjectIdentity(tenant="t", project="p", queue=queue))


def test_a_queue_borrows_what_its_cohort_does_not_use_and_the_lender_waits_without_reclaiming():
    sim = _cluster()
    borrower = _submit(sim, "big", 8, "mine", run_s=100)
    assert sim.job(borrower).state is JobState.RUNNING  # 4 of its own + 4 borrowed
    lender = _submit(sim, "theirs", 2, "theirs", run_s=10)
    job = sim.job(lender)
    assert job.state is JobState.PENDING and job.reason is Reason.CAPACITY
    assert "insufficient unused quota for nvidia.com/gpu in flavor a100, 2 more needed" in job.raw_reason
    sim.clock.advance(100)
    sim.tick()
    assert sim.job(lender).state is JobState.RUNNING and sim.job(lender).started_at == 100


def test_a_queue_cannot_pass_its_own_limit_even_with_the_cohort_idle():
    sim = _cluster()
    over = _submit(sim, "over", 8, "mine", run_s=10)
    too_big = _submit(sim, "too-big", 1, "mine", run_s=10)
    assert sim.job(over).state is JobState.RUNNING and sim.job(too_big).state is JobState.PENDING


def test_a_higher_priority_job_evicts_the_latest_lower_one_of_its_queue_which_runs_again_from_the_start():
    sim = _cluster()
    first = _submit(sim, "first", 2, "mine", run_s=50, priority="low")
    sim.clock.advance(5)
    second = _submit(sim, "second", 2, "mine", run_s=50, priority="low")
    local = _submit(sim, "local", 4, "theirs", run_s=500)
    sim.clock.advance(5)
    urgent = _submit(sim, "urgent", 2, "mine", run_s=20, priority="high")
    assert sim.job(urgent).state is JobState.RUNNING
    evicted = sim.job(second)
    assert evicted.state is JobState.PENDING and evicted.preempted == 1 and evicted.reason is Reason.CAPACITY
    assert evicted.first_started_at == 5 and sim.job(first).state is JobState.RUNNING
    assert sim.job(local).state is JobState.RUNNING  # another queue's job is never a victim
    sim.clock.advance(20)  # urgent ends at 30: the evicted job starts again, for its whole run
    sim.tick()
    assert evicted.state is JobState.RUNNING and evicted.started_at == 30
    sim.clock.advance(35)  # its first run would have ended at 55: that end is not its end
    sim.tick()
    assert evicted.state is JobState.RUNNING
    sim.clock.advance(20)
    sim.tick()
    assert evicted.state is JobState.COMPLETED and evicted.ended_at == 80


def test_a_higher_priority_job_is_looked_at_before_a_lower_one_of_its_queue_that_needs_no_borrowing():
    # Kueue takes one head per ClusterQueue per cycle: "urgent" (it must borrow) is the head
    # of "mine", so "normal" (it would fit the nominal quota) is not admitted ahead of it and
    # then preempted by it (the calibration's b15 and h16, docs/simulator.md)
    sim = _cluster()
    _submit(sim, "kept", 2, "mine", run_s=500, priority="high")
    _submit(sim, "theirs", 2, "theirs", run_s=500)
    _submit(sim, "ending", 4, "mine", run_s=10, priority="high")  # mine holds 6: 2 borrowed
    sim.clock.advance(1)
    normal = _submit(sim, "normal", 2, "mine", run_s=50)
    urgent = _submit(sim, "urgent", 4, "mine", run_s=50, priority="high")
    sim.clock.advance(9)
    sim.tick()
    assert sim.job(urgent).state is JobState.RUNNING and sim.job(urgent).started_at == 10
    assert sim.job(normal).state is JobState.PENDING and sim.job(normal).preempted == 0


def test_a_queue_that_never_preempts_keeps_its_high_priority_job_waiting():
    sim = _cluster(preemption="")
    low = _submit(sim, "low", 4, "mine", run_s=50, priority="low")
    _submit(sim, "local", 4, "theirs", run_s=500)
    urgent = _submit(sim, "urgent", 2, "mine", run_s=20, priority="high")
    assert sim.job(urgent).state is JobState.PENDING and sim.job(low).preempted == 0


def test_kueue_takes_the_first_flavor_with_quota_even_where_no_node_holds_the_pod():
    quotas = [GroupQuota(f"ClusterQueue mine flavor {f}", pool=f, scope="mine", limit_gpus=8) for f in ("a", "h")]
    nodes = [SimNode(name="a1", gpu_model="A100", gpu_memory_gb=80, gpus=4, flavor="a"),
             SimNode(name="a2", gpu_model="A100", gpu_memory_gb=80, gpus=4, flavor="a"),
             SimNode(name="h1", gpu_model="H100", gpu_memory_gb=80, gpus=8, flavor="h")]
    sim = SimulatedCluster("k", "kueue", nodes, clock=SimClock(), queueing="backfill",
                           queue_quotas=queue_quotas(quotas))
    spec = validate_spec({"project": "p", "name": "big", "command": "sleep 1", "gpus_per_worker": 8,
                          "gpu_models": ["A100", "H100"], "time_limit_minutes": 1})
    sim.runtimes.set("big", 10)
    job = sim.job(sim.submit(spec, "big", ProjectIdentity(tenant="t", project="p", queue="mine")))
    # flavor "a" has the quota: admitted there, on no node (8 GPUs in one pod, nodes of 4)
    assert job.state is JobState.RUNNING and job.placement == [] and sum(n.allocated for n in sim.nodes) == 0
    sim.clock.advance(60)
    sim.tick()
    assert job.state is JobState.FAILED and job.ended_at == 60  # the Job's deadline, not its 10 s
