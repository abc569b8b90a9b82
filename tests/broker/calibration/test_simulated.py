"""The simulator's side: built from the partition's inventory and limits as the backend
reports them, played at the job list's instants."""
from __future__ import annotations

from dataclasses import replace

import pytest

from broker.calibration.compare import started_ahead
from broker.calibration.jobs import parse
from broker.calibration.simulated import NotCalibratable, play, simulator_for
from tests.broker.calibration.helpers import inventory, shipped


def test_the_simulator_has_the_partitions_nodes_and_its_per_job_cap():
    sim = simulator_for(inventory(cap=4), "calib")
    assert [(n.name, n.gpus, n.partition) for n in sim.nodes] == [("n1", 8, "calib"), ("n2", 8, "calib")]
    assert sim.partitions["calib"].max_gpus_per_job == 4 and sim.queueing == "backfill"


def test_a_partition_not_idle_or_not_there_is_refused_saying_which():
    with pytest.raises(NotCalibratable, match=r"not idle: n2 \(3 of 8 GPUs\) allocated"):
        simulator_for(inventory(allocated=3), "calib")
    with pytest.raises(NotCalibratable, match=r"partition 'nope': not in ci's inventory \(calib, gpu\)"):
        simulator_for(inventory(), "nope")


def test_the_shipped_slice_is_contended_on_the_simulator():
    played = play(simulator_for(inventory(), "calib"), shipped(), samples=[float(t) for t in range(0, 120, 5)])
    started = [o for o in played.jobs.values() if o.started_s is not None]
    waited = [o for o in started if o.started_s - o.submitted_s >= 2.0]
    assert len(waited) >= 0.3 * len(played.jobs)
    assert len(started_ahead(played, 2.0)) >= 3
    assert any(reasons for reasons in played.reasons.values())


def test_a_job_past_its_limit_is_killed_at_it_and_a_cancelled_waiting_job_never_starts():
    played = play(simulator_for(inventory(), "calib"), shipped(), samples=[])
    overrun = played.jobs["overrun"]
    assert overrun.state == "timeout" and overrun.ended_s - overrun.started_s == 60.0
    cancelled = [o for o in played.jobs.values() if o.state == "cancelled"]
    assert cancelled and all(o.started_s is None for o in cancelled)


def test_a_cap_below_a_jobs_ask_leaves_it_waiting_on_policy():
    played = play(simulator_for(inventory(cap=4), "calib"), shipped(), samples=[3.0])
    assert played.reasons[3.0]["gang-16"] == "policy"
    assert played.jobs["gang-16"].started_s is None


def _limits_sim():
    from broker.calibration.simulated import simulator_for as build
    from broker.local_limits import GroupQuota, JobCap, LocalLimits
    base = inventory()
    limits = LocalLimits(caps=(JobCap("QoS gpu-small (MaxTRESPerJob=gres/gpu=2)", scope="qos:gpu-small", max_gpus=2),),
                         quotas=(GroupQuota("association research (GrpTRES=gres/gpu=4)", scope="research",
                                            limit_gpus=4),))
    return build(replace(base, limits=limits), "calib")


def test_an_accounts_grptres_holds_its_jobs_while_gpus_are_free_and_a_qos_cap_never_lets_one_run():
    jobs = parse({"name": "t", "jobs": [
        {"name": "r1", "at_s": 0, "gpus_per_worker": 2, "run_s": 10, "time_limit_min": 1, "account": "research"},
        {"name": "r2", "at_s": 1, "gpus_per_worker": 2, "run_s": 10, "time_limit_min": 1, "account": "research"},
        {"name": "r3", "at_s": 2, "gpus_per_worker": 1, "run_s": 10, "time_limit_min": 1, "account": "research"},
        {"name": "g4", "at_s": 3, "gpus_per_worker": 1, "run_s": 10, "time_limit_min": 1},
        {"name": "q5", "at_s": 4, "gpus_per_worker": 4, "run_s": 10, "time_limit_min": 1, "local": True,
         "qos": "gpu-small", "cancel_at_s": 30},
        {"name": "q6", "at_s": 5, "gpus_per_worker": 2, "run_s": 10, "time_limit_min": 1, "local": True,
         "qos": "gpu-small"}]})
    played = play(_limits_sim(), jobs, [6.0])
    starts = {n: o.started_s for n, o in played.jobs.items()}
    # r3: 2 + 2 + 1 > 4, so it starts when r1 has ended and completed (Slurm's second)
    assert starts == {"r1": 0, "r2": 1, "r3": 11, "g4": 3, "q5": None, "q6": 5}
    assert played.reasons[6.0] == {"r3": "policy", "q5": "policy"}  # AssocGrpGRES, QOSMaxGRESPerJob


def test_a_qos_on_a_brokers_job_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"job 1 \(a\): qos is named by local jobs only"):
        parse({"jobs": [{"name": "a", "at_s": 0, "gpus_per_worker": 1, "run_s": 5, "time_limit_min": 1,
                         "qos": "gpu-small"}]})


def _sim_with(**limits):
    from broker.calibration.simulated import simulator_for as build
    from broker.local_limits import LocalLimits

    return build(replace(inventory(), limits=LocalLimits(**limits)), "calib")


def _fair_share_list(*names: str):
    """A gang of the whole partition first, then 8-GPU jobs: h* of fs-heavy, l* (a gang of
    two nodes) of fs-light, each submitted at its digit's second."""

    def job(name: str) -> dict:
        light = name.startswith("l")
        return {"name": name, "at_s": int(name[1:]), "gpus_per_worker": 8, "workers": 2 if light else 1,
                "run_s": 10, "time_limit_min": 1, "account": "fs-light" if light else "fs-heavy"}

    first = {"name": "all", "at_s": 0, "gpus_per_worker": 8, "workers": 2, "run_s": 10, "time_limit_min": 1}
    return parse({"name": "t", "jobs": [first, *(job(n) for n in names)]})


def test_a_lower_fair_share_waits_behind_a_higher_one_submitted_later():
    from broker.local_limits import FairShare

    sim = _sim_with(shares=(FairShare("fs", "fs-heavy", 0.01, 1000.0), FairShare("fs", "fs-light", 1.0, 100000.0)))
    starts = {n: o.started_s for n, o in play(sim, _fair_share_list("h1", "h2", "l3"), [5.0]).jobs.items()}
    # the whole partition frees at 10 s (and is free a completing second later): the light
    # account's gang goes first, though last in
    assert starts == {"all": 0, "l3": 11, "h1": 22, "h2": 22}


def test_without_fair_share_the_same_jobs_start_in_submission_order():
    starts = {n: o.started_s for n, o in play(_sim_with(), _fair_share_list("h1", "l3"), [5.0]).jobs.items()}
    assert starts == {"all": 0, "h1": 11, "l3": 22}


def test_a_time_limit_over_the_partitions_maxtime_waits_on_policy_and_holds_nothing_back():
    from broker.local_limits import JobCap

    sim = _sim_with(caps=(JobCap("partition calib", pool="calib", max_time_s=600.0),))
    jobs = parse(
        {
            "name": "t",
            "jobs": [
                {
                    "name": "long",
                    "at_s": 0,
                    "gpus_per_worker": 8,
                    "workers": 2,
                    "run_s": 10,
                    "time_limit_min": 15,
                    "cancel_at_s": 30,
                },
                {"name": "short", "at_s": 1, "gpus_per_worker": 8, "run_s": 10, "time_limit_min": 10},
            ],
        }
    )
    played = play(sim, jobs, [5.0])
    assert played.reasons[5.0] == {"long": "policy"}  # PartitionTimeLimit
    assert played.jobs["long"].started_s is None and played.jobs["short"].started_s == 1


def test_a_job_placed_around_the_backfill_plan_never_takes_gpus_a_job_started_in_the_same_pass_holds():
    # the fair-share list made it happen: at 48 s eight small jobs went onto the 4 free GPUs
    # of one node, each re-placed around the plan as if the starts before it in the pass
    # had not taken any
    from pathlib import Path

    from broker.calibration.jobs import load
    from broker.local_limits import FairShare, JobCap

    sim = _sim_with(
        caps=(JobCap("partition calib", pool="calib", max_time_s=600.0),),
        shares=(FairShare("fs", "fs-heavy", 0.01, 1351.0), FairShare("fs", "fs-light", 1.0, 100000.0)),
    )
    jobs = load(Path(__file__).parent / "data" / "slurm-fairshare-16gpu.json")
    played = play(sim, jobs, [48.0])
    size = {"n1": 8, "n2": 8}
    by_name = {j.name: j for j in jobs.jobs}
    ran = [(o, by_name[n]) for n, o in played.jobs.items() if o.started_s is not None]
    for t in sorted({o.started_s for o, _ in ran}):
        used = dict.fromkeys(size, 0)
        for o, job in ran:
            if o.started_s <= t < o.ended_s:
                for node in o.nodes.split(","):
                    used[node] += job.gpus // len(o.nodes.split(","))
        assert all(used[n] <= size[n] for n in size), (t, used)
