"""Under Slurm's fair share the local queue is ordered by account: the GPUs pending under
accounts with less fair share than the job's do not wait ahead of it (the calibration saw
Slurm start a light account's jobs before a heavy account's queued earlier)."""
from __future__ import annotations

import pytest

from broker.backends.base import InventorySnapshot, QueueStats
from broker.local_limits import FairShare, LocalLimits
from broker.placement import terms

SHARES = LocalLimits(shares=(FairShare("fair share of account heavy", "heavy", 0.1, 10.0),
                             FairShare("fair share of account light", "light", 0.9, 90.0)))


def _fair(kit, name: str, queue: QueueStats) -> InventorySnapshot:
    snap = kit.snap(name, kit.pool(name, [8, 8]), queue=queue)
    return InventorySnapshot(snap.cluster, snap.taken_at, snap.pools, snap.queue, SHARES)


def test_the_queue_wait_counts_only_the_pending_gpus_of_accounts_not_below_the_jobs(kit):
    queue = QueueStats(3, 24, 8.0, pending_gpus_by_scope=(("heavy", 24),))
    fleet = kit.fleet([_fair(kit, "fs", queue)])
    full = terms.queue_wait_s(queue, fleet.policy.queue)
    assert full > 0
    light = kit.place(fleet, kit.spec(gpus_per_worker=4), scopes=("light",)).best
    heavy = kit.place(fleet, kit.spec(gpus_per_worker=4), scopes=("heavy",)).best
    assert light.breakdown["queue_wait_s"] == 0.0
    assert heavy.breakdown["queue_wait_s"] == pytest.approx(full)


def test_a_job_of_an_account_the_cluster_gives_no_factor_counts_the_whole_queue(kit):
    queue = QueueStats(3, 24, 8.0, pending_gpus_by_scope=(("heavy", 24),))
    fleet = kit.fleet([_fair(kit, "fs", queue)])
    best = kit.place(fleet, kit.spec(gpus_per_worker=4), scopes=("newcomer",)).best
    assert best.breakdown["queue_wait_s"] == pytest.approx(terms.queue_wait_s(queue, fleet.policy.queue))


def test_fair_share_moves_the_light_accounts_job_to_the_longer_queue_it_would_jump(kit):
    fair = _fair(kit, "fs", QueueStats(3, 24, 8.0, pending_gpus_by_scope=(("heavy", 24),)))
    plain = kit.snap("plain", kit.pool("plain", [8, 8]), queue=QueueStats(1, 8, 8.0))
    fleet = kit.fleet([fair, plain])
    assert kit.place(fleet, kit.spec(gpus_per_worker=4), scopes=("light",)).best.cluster == "fs"
    assert kit.place(fleet, kit.spec(gpus_per_worker=4), scopes=("heavy",)).best.cluster == "plain"


def test_without_fair_share_the_accounts_of_the_queue_change_nothing(kit):
    queue = QueueStats(3, 24, 8.0, pending_gpus_by_scope=(("heavy", 24),))
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8, 8]), queue=queue)])
    best = kit.place(fleet, kit.spec(gpus_per_worker=4), scopes=("light",)).best
    assert best.breakdown["queue_wait_s"] == pytest.approx(terms.queue_wait_s(queue, fleet.policy.queue))
