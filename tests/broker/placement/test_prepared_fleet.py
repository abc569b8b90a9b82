"""The prepared fleet within one placement pass: what a decision books, later ones see."""

from __future__ import annotations

from broker.backends.base import InventorySnapshot
from broker.local_limits import GroupQuota, LocalLimits


def _with(snap: InventorySnapshot, limits: LocalLimits) -> InventorySnapshot:
    return InventorySnapshot(snap.cluster, snap.taken_at, snap.pools, snap.queue, limits)


def test_a_booked_placement_uses_the_local_quota_for_the_rest_of_the_pass(kit):
    # room on the nodes for two 8-GPU jobs, but the ClusterQueue has 8 GPUs of headroom
    quota = LocalLimits(quotas=(GroupQuota("ClusterQueue cq", limit_gpus=16, used_gpus=8),))
    fleet = kit.fleet([_with(kit.snap("a", kit.pool("a", [8, 8, 8])), quota)])
    first = kit.place(fleet, kit.spec(gpus_per_worker=8))
    assert first.best is not None and first.best.breakdown["queue_wait_s"] == 0
    fleet.take(first.best)
    assert fleet.clusters["a"].limits.quotas[0].used_gpus == 16
    second = kit.place(fleet, kit.spec(gpus_per_worker=8))
    assert second.best is None and second.excluded["a"].rule == "local_quota"  # waits for the quota


def test_a_booked_placement_takes_its_gpus_off_the_nodes(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))])
    first = kit.place(fleet, kit.spec(gpus_per_worker=8))
    assert first.best is not None
    fleet.take(first.best)
    assert kit.place(fleet, kit.spec(gpus_per_worker=8)).best is None
