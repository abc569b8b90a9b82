"""A workload's life through the broker, against simulated clusters."""
from __future__ import annotations


from broker.models import AuditRecord, Reservation, Workload
from broker.services.fleet.inventory import cluster_sync_inventory


def test_submitted_job_is_placed_dispatched_runs_and_finishes_with_audit_trail(make_cluster, submit, drive, poll, sim):
    cluster = make_cluster("onprem")
    workload = drive(submit(gpus_per_worker=2, workers=2))
    assert workload.state == "queued" and workload.cluster == cluster and workload.destination_job_id

    sim.advance(1)
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "running" and workload.started_at

    sim.advance(3 * 3600)
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "completed" and workload.ended_at
    assert list(Reservation.objects.filter(workload=workload).values_list("state", flat=True)) == ["released"]
    actions = list(AuditRecord.objects.filter(workload=workload).values_list("action", flat=True))
    assert actions[:2] == ["workload.submitted", "reservation.created"]
    assert "placement.decided" in actions and "dispatch.accepted" in actions and actions[-1] == "workload.completed"


def test_placement_decision_records_policy_version_inputs_cluster_and_scores(make_cluster, submit, drive):
    make_cluster("onprem")
    workload = drive(submit())
    decision = AuditRecord.objects.get(workload=workload, action="placement.decided")
    assert len(decision.policy_version) >= 12 and decision.policy_version == workload.policy_version
    assert decision.cluster == "onprem"
    assert {"queue_wait_s", "gpu_cost"} <= set(decision.score_breakdown["breakdown"])
    assert decision.inputs["spec"]["gpus_per_worker"] == 2
    accepted = AuditRecord.objects.get(workload=workload, action="dispatch.accepted")
    assert accepted.destination_job_id == workload.destination_job_id


def test_fragmented_gang_is_not_placed_and_waits_for_capacity_not_policy(make_cluster, submit, drive, sim):
    # 4 free GPUs in pieces: 1+1 on two nodes of one cluster, 1+1 on another; each cluster
    # could hold the gang once its foreign jobs end, so it waits rather than being rejected
    # (Kubernetes: two pods may share a node; on Slurm four workers would need four nodes)
    clusters = [make_cluster(name, flavor="kueue", nodes=[4, 4]) for name in ("a", "b")]
    for cluster in clusters:
        for _ in range(2):
            sim.get(cluster.name).inject_foreign_job(gpus_per_worker=3, duration_s=7200)
        cluster_sync_inventory(cluster_id=cluster.id)
    workload = drive(submit(gpus_per_worker=2, workers=4))
    assert workload.state == "waiting"
    assert workload.reason == "capacity"
    assert "of 4 workers of 2 GPUs fit now" in workload.raw_reason
    assert "a:" in workload.raw_reason and "b:" in workload.raw_reason
    assert not Reservation.objects.filter(workload=workload).exists()


def test_gang_no_cluster_could_hold_even_idle_is_rejected_with_each_reason(make_cluster, submit, drive):
    # 8 GPUs in the fleet, but in pieces no single cluster could ever put together
    make_cluster("a", nodes=[2, 2])
    make_cluster("b", nodes=[2, 2])
    workload = drive(submit(gpus_per_worker=2, workers=4))
    assert workload.state == "rejected" and workload.ended_at
    assert "can never hold 4 x 2 GPUs" in workload.raw_reason
    assert "a:" in workload.raw_reason and "b:" in workload.raw_reason
    assert {e["rule"] for e in workload.placement["excluded"].values()} == {"never_fits"}
    assert not Reservation.objects.filter(workload=workload).exists()


def test_gang_that_fits_by_packing_workers_on_nodes_is_placed(make_cluster, submit, drive):
    make_cluster("a", nodes=[2, 2, 2, 2])
    workload = drive(submit(gpus_per_worker=2, workers=4))
    assert workload.state == "queued"
    chosen = workload.placement["chosen"]
    assert sorted(chosen["assignment"]) == sorted(f"a-n{i}-01" for i in range(4))


def test_job_outside_policy_is_rejected_with_the_reason(make_cluster, submit, drive):
    make_cluster("onprem")
    workload = drive(submit(mig_profile="3g.40gb"))
    assert workload.state == "rejected" and workload.reason == "policy"
    assert "onprem" in workload.raw_reason


def test_local_rejection_releases_reservation_and_tries_the_next_cluster(make_cluster, submit, drive, sim):
    make_cluster("first", price="0.5")
    second = make_cluster("second", price="3.0", location="cloud")
    sim.get("first").set_faults(rejects="invalid account")
    workload = drive(submit())
    assert workload.state == "queued" and workload.cluster == second
    assert workload.tried_clusters == ["first"]
    states = list(Reservation.objects.filter(workload=workload).order_by("id").values_list("state", "cluster__name"))
    assert states == [("released", "first"), ("confirmed", "second")]


def test_rejection_everywhere_rejects_the_workload_with_the_local_reason(make_cluster, submit, drive, sim):
    make_cluster("only")
    sim.get("only").set_faults(rejects="QOSMaxGRESPerJob")
    workload = drive(submit())
    assert workload.state == "rejected"
    assert "QOSMaxGRESPerJob" in workload.raw_reason
    assert Reservation.objects.get(workload=workload).state == "released"


def test_local_queue_reason_is_normalised_and_raw_text_kept(make_cluster, submit, drive, poll, sim):
    cluster = make_cluster("onprem", nodes=[8])
    # someone else's job takes the node after the broker's last inventory report
    sim.get("onprem").inject_foreign_job(gpus_per_worker=8, account="other")
    workload = drive(submit(gpus_per_worker=8))
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.cluster == cluster
    assert workload.reason == "capacity"
    assert "Resources" in workload.raw_reason or "Priority" in workload.raw_reason


def test_resubmission_from_checkpoint_only_after_the_old_run_is_declared_dead(
        make_cluster, submit, drive, poll, sim, trio):
    from broker.models import Escalation
    from broker.services.following.escalations import escalation_resolve

    cluster = make_cluster("onprem")
    sim.get("onprem").set_faults(loses_job=True)
    workload = drive(submit(checkpointable=True))
    sim.advance(1)
    poll(cluster)  # seen running once
    sim.advance(1)
    poll(cluster)  # then no longer reported
    esc = Escalation.objects.get(workload=workload, kind="lost_job")
    workload.refresh_from_db()
    assert workload.state in ("queued", "running")  # unclear: never released automatically
    assert Reservation.objects.get(workload=workload).state == "confirmed"

    escalation_resolve(user=trio.owner, escalation_id=esc.id, outcome="node rebooted, job gone",
                       old_run_dead=True)
    workload.refresh_from_db()
    assert workload.state == "failed"
    retry = Workload.objects.get(resubmit_of=workload)
    assert retry.spec["checkpointable"] is True and retry.state in ("submitted", "waiting", "reserved", "queued")
