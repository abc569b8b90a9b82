"""Placement against the destinations' own admission rules, through the real services and
simulated clusters: QoS caps, ClusterQueue quotas, GPUs promised since the last report,
the burst allowance."""
from __future__ import annotations

from datetime import timedelta

from broker.backends.sim import Partition
from broker.models import Cluster, GpuPool, Reservation
from broker.services.fleet.inventory import cluster_sync_inventory
from tests.factories import WorkloadFactory


def _slurm_with_qos_cap(make_cluster, cap: int = 16):
    return make_cluster("onprem-slurm", nodes=[8, 8, 8, 8], partitions=[Partition("gpu", cap, True)])


def _kueue_with_quota(make_cluster, quota: int = 24):
    return make_cluster("cloud-k8s", flavor="kueue", nodes=[8, 8, 8, 8], location="cloud", price="4.1",
                        quotas={"a100-80gb": quota})


def test_inventory_stores_the_clusters_local_limits(make_cluster):
    slurm, kueue = _slurm_with_qos_cap(make_cluster), _kueue_with_quota(make_cluster)
    assert slurm.local_limits["caps"] == [{"source": "QoS of partition gpu (MaxTRESPerJob=gres/gpu=16)",
                                           "pool": "a100-80gb", "max_gpus": 16}]
    [quota] = kueue.local_limits["quotas"]
    assert quota["pool"] == "a100-80gb" and quota["limit_gpus"] == 24 and quota["used_gpus"] == 0


def test_gang_over_the_qos_cap_and_the_clusterqueue_quota_is_rejected_with_both_rules(make_cluster, submit, drive):
    # the demo's 4 x 8 a100-80gb gang: Slurm's QoS caps a job at 16, the ClusterQueue admits 24
    _slurm_with_qos_cap(make_cluster), _kueue_with_quota(make_cluster)
    workload = drive(submit(gpus_per_worker=8, workers=4))
    assert workload.state == "rejected" and workload.reason == "policy"
    excluded = workload.placement["excluded"]
    assert excluded["onprem-slurm"] == {
        "rule": "local_limit",
        "message": "QoS of partition gpu (MaxTRESPerJob=gres/gpu=16) caps a job at 16 GPUs; this job needs 32"}
    assert excluded["cloud-k8s"]["rule"] == "local_limit"
    assert "admits at most 24 GPUs; this job needs 32" in excluded["cloud-k8s"]["message"]
    assert not Reservation.objects.filter(workload=workload).exists()  # never held the tenant's quota


def test_gang_over_the_qos_cap_goes_where_the_local_quota_admits_it(make_cluster, submit, drive):
    _slurm_with_qos_cap(make_cluster)
    cloud = _kueue_with_quota(make_cluster)
    workload = drive(submit(gpus_per_worker=8, workers=3))
    assert workload.state == "queued" and workload.cluster == cloud
    assert workload.placement["excluded"]["onprem-slurm"]["rule"] == "local_limit"


def test_gang_within_the_qos_cap_stays_on_prem(make_cluster, submit, drive):
    slurm = _slurm_with_qos_cap(make_cluster)
    _kueue_with_quota(make_cluster)
    workload = drive(submit(gpus_per_worker=8, workers=2))
    assert workload.state == "queued" and workload.cluster == slurm


def test_a_job_over_the_local_quota_left_waits_at_the_broker_not_at_the_destination(make_cluster, submit, drive,
                                                                                      sim, poll):
    cloud = _kueue_with_quota(make_cluster, quota=16)
    first = drive(submit(gpus_per_worker=8, workers=1, time_limit_minutes=600))
    sim.advance(1)
    poll(cloud)
    cluster_sync_inventory(cluster_id=cloud.id)
    second = drive(submit(gpus_per_worker=8, workers=2, time_limit_minutes=600))
    assert first.cluster == cloud
    assert second.state == "waiting" and second.reason == "capacity" and second.cluster is None
    excluded = second.placement["excluded"]["cloud-k8s"]
    assert excluded["rule"] == "local_quota"
    assert excluded["message"].startswith("ClusterQueue cloud-k8s flavor a100-80gb admits 16 GPUs, ")
    assert "this job needs 16: it would wait there about" in excluded["message"]
    assert not Reservation.objects.filter(workload=second).exists()


def test_a_job_queued_at_its_destination_counts_against_that_pool_after_the_next_report(make_cluster, submit,
                                                                                        drive, trio):
    # a job the broker sent that a status poll saw waiting in the local queue: the next report
    # shows only what runs, so without it the pool would look free and more work would queue
    # behind it
    cluster = make_cluster("pool16", nodes=[8, 8])
    pool = GpuPool.objects.get(cluster=cluster)
    node = pool.nodes[0]["name"]
    WorkloadFactory(project=trio.project, cluster=cluster, state="queued", total_gpus=8, reason="capacity",
                    dispatched_at=pool.taken_at - timedelta(minutes=5),
                    placement={"chosen": {"cluster": cluster.name, "pool": pool.name, "assignment": [node],
                                          "gpus_per_worker": 8}})
    cluster_sync_inventory(cluster_id=cluster.id)  # a report newer than its dispatch
    pool.refresh_from_db()
    assert (pool.gpus_reserved, pool.gpus_idle) == (8, 8)
    second = drive(submit(gpus_per_worker=8, name="two"))
    third = drive(submit(gpus_per_worker=8, name="three"))
    assert second.cluster == cluster and node not in second.placement["chosen"]["assignment"]
    assert third.state == "waiting" and third.reason == "capacity"


def test_a_job_that_started_or_was_not_yet_seen_waiting_is_counted_by_the_report_alone(make_cluster, trio):
    # started before the report: the report shows it; sent before it and not yet polled: it
    # may have started at once (then the report shows it too), so it is not counted twice
    from broker.selectors.capacity import promised_gpus

    cluster = make_cluster("pool16", nodes=[8, 8])
    pool = GpuPool.objects.get(cluster=cluster)
    earlier = pool.taken_at - timedelta(minutes=5)
    chosen = {"chosen": {"pool": pool.name, "assignment": [pool.nodes[0]["name"]], "gpus_per_worker": 8}}
    WorkloadFactory(project=trio.project, cluster=cluster, state="running", total_gpus=8, dispatched_at=earlier,
                    started_at=earlier, placement=chosen)
    WorkloadFactory(project=trio.project, cluster=cluster, state="queued", total_gpus=8, dispatched_at=earlier,
                    reason="", placement=chosen)
    assert promised_gpus(cluster_ids=[cluster.id])[cluster.id].pools == {}


def test_three_eight_gpu_jobs_into_sixteen_gpus_between_reports_the_third_waits(make_cluster, submit, drive, sim,
                                                                               poll):
    # no inventory report between the three: the first has started, the second is on its way
    cluster = make_cluster("pool16", nodes=[8, 8])
    first = drive(submit(gpus_per_worker=8, name="one"))
    sim.advance(1)
    poll(cluster)
    first.refresh_from_db()
    assert first.state == "running"
    second = drive(submit(gpus_per_worker=8, name="two"))
    third = drive(submit(gpus_per_worker=8, name="three"))
    assert second.state == "queued"
    assert set(first.placement["chosen"]["assignment"]).isdisjoint(second.placement["chosen"]["assignment"])
    assert third.state == "waiting" and third.reason == "capacity"
    assert not Reservation.objects.filter(workload=third).exists()


def test_inventory_figures_show_gpus_promised_since_the_report(make_cluster, submit):
    from broker.services.placing.cycle import workload_place

    cluster = make_cluster("figures", nodes=[8, 8])
    workload = workload_place(workload_id=submit(gpus_per_worker=8).id)  # reserved, not yet dispatched
    assert workload.state == "reserved"
    cluster_sync_inventory(cluster_id=cluster.id)
    pool = GpuPool.objects.get(cluster=cluster)
    assert (pool.gpus_reserved, pool.gpus_idle) == (8, 8)


def test_burst_gpus_take_the_tenant_past_its_quota_on_cloud_only(make_cluster, submit, drive, quota):
    # the policy gives physics burst_gpus: 16 above its quota, for cloud clusters
    quota.limit_gpus = 16
    quota.save()
    onprem = make_cluster("onprem", nodes=[8, 8, 8, 8], price="1.0")
    cloud = make_cluster("cloud", nodes=[8, 8], location="cloud", price="4.0")
    first = drive(submit(gpus_per_worker=8, workers=2, name="first"))
    assert first.cluster == onprem
    second = drive(submit(gpus_per_worker=8, workers=2, name="second"))
    assert second.state == "queued" and second.cluster == cloud
    assert "cloud clusters only" in second.placement["excluded"]["onprem"]["message"]
    third = drive(submit(gpus_per_worker=8, name="third"))
    assert third.state == "waiting" and third.reason == "policy"
    assert Cluster.objects.get(name="onprem").location == "onprem"
