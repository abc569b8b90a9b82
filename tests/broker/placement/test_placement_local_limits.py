"""The placement library against local limits, egress at the source and the burst allowance."""
from __future__ import annotations

import pytest

from broker.backends.base import InventorySnapshot, QueueStats
from broker.local_limits import GroupQuota, JobCap, LocalLimits, add_use


def _with(snap: InventorySnapshot, limits: LocalLimits) -> InventorySnapshot:
    return InventorySnapshot(snap.cluster, snap.taken_at, snap.pools, snap.queue, limits)


def test_partition_node_and_time_caps_exclude_with_the_numbers(kit):
    snap = kit.snap("a", kit.pool("a", [8, 8, 8]))
    caps = LocalLimits(caps=(JobCap("partition gpu", max_nodes=2, max_time_s=3600),))
    fleet = kit.fleet([_with(snap, caps)])
    nodes = kit.place(fleet, kit.spec(gpus_per_worker=8, workers=3, time_limit_minutes=30))
    assert nodes.excluded["a"].rule == "local_limit"
    assert nodes.excluded["a"].message == "partition gpu caps a job at 2 nodes; this job needs 3"
    time = kit.place(fleet, kit.spec(gpus_per_worker=8, workers=1, time_limit_minutes=120))
    assert time.excluded["a"].message == "partition gpu caps a job at 60 minutes; this job asks for 120 minutes"


def test_a_cap_on_another_account_does_not_apply(kit):
    snap = kit.snap("a", kit.pool("a", [8, 8]))
    caps = LocalLimits(caps=(JobCap("QoS gpu-small of account research", scope="research", max_gpus=2),))
    fleet = kit.fleet([_with(snap, caps)])
    assert kit.place(fleet, kit.spec(gpus_per_worker=8), scopes=("lattice",)).best is not None
    out = kit.place(fleet, kit.spec(gpus_per_worker=8), scopes=("research",))
    assert out.excluded["a"].message.endswith("caps a job at 2 GPUs; this job needs 8")


def test_quota_with_borrowing_names_nominal_and_borrowed(kit):
    snap = kit.snap("a", kit.pool("a", [8, 8, 8, 8]))
    quota = LocalLimits(quotas=(GroupQuota("ClusterQueue cq", limit_gpus=24, borrow_gpus=8),))
    result = kit.place(kit.fleet([_with(snap, quota)]), kit.spec(gpus_per_worker=8, workers=4))
    assert result.excluded["a"].message == ("ClusterQueue cq admits at most 24 GPUs (nominal 16 + borrowing 8); "
                                            "this job needs 32")
    assert result.reason == "policy"


def test_a_pool_whose_local_quota_is_used_up_is_no_place_to_start_the_job_now(kit):
    # sent there, the job would wait in the local queue for quota: it waits at the broker
    full = _with(kit.snap("full", kit.pool("full", [8, 8]), queue=QueueStats(0, 0, 16.0)),
                 LocalLimits(quotas=(GroupQuota("ClusterQueue cq", limit_gpus=16, used_gpus=16),)))
    room = kit.snap("room", kit.pool("room", [8, 8]))
    result = kit.place(kit.fleet([full, room]), kit.spec(gpus_per_worker=8))
    assert [c.cluster for c in result.ranked] == ["room"]
    assert result.excluded["full"].rule == "local_quota"
    assert result.excluded["full"].message == ("ClusterQueue cq admits 16 GPUs, 16 in use or sent; this job needs 8: "
                                               "it would wait there about 30 min for quota")
    alone = kit.place(kit.fleet([full]), kit.spec(gpus_per_worker=8))
    assert alone.ranked == [] and alone.reason == "capacity"


def test_a_local_job_count_limit_reached_keeps_the_job_at_the_broker(kit):
    snap = _with(kit.snap("a", kit.pool("a", [8, 8])),
                 LocalLimits(quotas=(GroupQuota("association research", max_jobs=2, running_jobs=2),)))
    result = kit.place(kit.fleet([snap]), kit.spec(gpus_per_worker=1))
    assert result.ranked == [] and result.reason == "capacity"
    assert result.excluded["a"].message.startswith("association research admits 2 jobs at once, 2 running or sent")


def test_promised_gpus_count_against_a_local_quota(kit):
    limits = LocalLimits(quotas=(GroupQuota("ClusterQueue cq", pool="gpu", limit_gpus=16, used_gpus=8),))
    assert add_use(limits, {"gpu": 8}, jobs=1).quotas[0].headroom_gpus == 0
    assert add_use(limits, {"other": 8}).quotas[0].headroom_gpus == 8


def test_pulling_a_terabyte_from_the_cloud_store_on_prem_pays_the_stores_egress(kit):
    onprem = kit.facts("onprem", region="eu-west", egress_per_gb=0.0, data_locations=("onprem-nfs",))
    cloud = kit.facts("cloud", region="eu-central", egress_per_gb=0.09, data_locations=("s3-eu-central",),
                      location="cloud")
    snaps = [kit.snap("onprem", kit.pool("onprem", [8])), kit.snap("cloud", kit.pool("cloud", [8]))]
    fleet = kit.fleet(snaps, [onprem, cloud])
    pull = kit.place(fleet, kit.spec(data_location="s3-eu-central", data_size_gb=1000))
    costs = {c.cluster: c.breakdown["transfer_cost"] for c in pull.ranked}
    assert costs == {"onprem": pytest.approx(90.0), "cloud": 0.0}
    push = kit.place(fleet, kit.spec(data_location="onprem-nfs", data_size_gb=1000))
    assert {c.cluster: c.breakdown["transfer_cost"] for c in push.ranked} == {"onprem": 0.0, "cloud": 0.0}


def test_egress_price_per_destination_region_and_staging_time_in_the_breakdown(kit):
    store = kit.facts("store", region="eu-central", egress_per_gb=0.09, data_locations=("s3",),
                      egress_by_region={"eu-central-b": 0.01})
    near = kit.facts("near", region="eu-central-b", default_bandwidth_gbps=8.0)
    fleet = kit.fleet([kit.snap("near", kit.pool("near", [8]))], [store, near])
    best = kit.place(fleet, kit.spec(data_location="s3", data_size_gb=100)).best
    assert best.breakdown["transfer_cost"] == pytest.approx(1.0)
    assert best.detail == {"staging_s": 100.0, "data_from": "store", "egress_per_gb": 0.01}


def test_burst_allowance_opens_cloud_clusters_only(kit):
    snaps = [kit.snap("onprem", kit.pool("onprem", [8])), kit.snap("cloud", kit.pool("cloud", [8]))]
    facts = [kit.facts("onprem"), kit.facts("cloud", location="cloud")]
    fleet = kit.fleet(snaps, facts)
    result = kit.place(fleet, kit.spec(gpus_per_worker=8), quota=0, cloud_quota_remaining=16)
    assert [c.cluster for c in result.ranked] == ["cloud"]
    assert result.excluded["onprem"].rule == "quota"
    assert "cloud clusters only" in result.excluded["onprem"].message
    none = kit.place(fleet, kit.spec(gpus_per_worker=8), quota=0, cloud_quota_remaining=4)
    assert not none.ranked and set(none.excluded) == {"onprem", "cloud"}
