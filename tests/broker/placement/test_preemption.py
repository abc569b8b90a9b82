"""Which running work the broker may preempt for a waiting workload, and the policy's
preemption owners with its errors naming the key."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from broker.placement.policy import PolicyError
from broker.placement.policy_loader import load_policy
from broker.placement.preemption import Preemption, Running, victims

T = datetime(2026, 12, 1, tzinfo=timezone.utc)
RULE = Preemption(owners={"*": "broker"}, preemptible=("low", "normal"))


def run(key: int, priority: str, gpus: int, minutes_ago: int) -> Running:
    return Running(key=key, priority=priority, gpus=gpus, since=T - timedelta(minutes=minutes_ago))


def test_nothing_is_taken_when_the_job_fits_beside_the_idle_gpus():
    assert victims(rule=RULE, priority="high", needed_gpus=4, idle_gpus=4, running=[run(1, "low", 8, 5)]) == []


def test_the_lowest_priority_and_latest_started_go_first_until_the_job_fits():
    running = [run(1, "low", 4, 60), run(2, "low", 4, 5), run(3, "normal", 4, 1), run(4, "low", 2, 30)]
    chosen = victims(rule=RULE, priority="high", needed_gpus=8, idle_gpus=2, running=running)
    assert [v.key for v in chosen] == [2, 4]  # 2 idle + 4 + 2


def test_only_a_lower_and_preemptible_priority_is_taken_and_too_little_takes_nothing():
    only_low = Preemption(owners={"*": "broker"}, preemptible=("low",))
    running = [run(1, "normal", 8, 5), run(2, "low", 2, 5)]
    assert victims(rule=only_low, priority="high", needed_gpus=8, idle_gpus=0, running=running) is None
    assert victims(rule=RULE, priority="normal", needed_gpus=8, idle_gpus=0, running=[run(1, "normal", 8, 5)]) is None
    assert victims(rule=RULE, priority="low", needed_gpus=2, idle_gpus=0, running=[run(1, "low", 8, 5)]) is None


def test_the_policy_names_the_owner_of_each_cluster_local_by_default():
    policy = load_policy("preemption:\n  owners: {'*': local, sim-onprem: broker}\n  after_s: 300\n")
    assert policy.preemption.owner("sim-onprem") == "broker" and policy.preemption.owner("hpc") == "local"
    assert policy.preemption.broker_owns_any and policy.preemption.preemptible == ("low",)
    assert not load_policy("").preemption.broker_owns_any
    assert load_policy("").preemption.max_per_workload == 2
    assert load_policy("preemption:\n  max_per_workload: 5\n").preemption.max_per_workload == 5


@pytest.mark.parametrize("text, key", [
    ("preemption:\n  owners: {hpc: kueue}\n", "preemption.owners.hpc"),
    ("preemption:\n  preemptible: [urgent]\n", "preemption.preemptible"),
    ("preemption:\n  after_s: -1\n", "preemption.after_s"),
    ("preemption:\n  max_per_workload: -2\n", "preemption.max_per_workload"),
    ("preemption:\n  owner: broker\n", "preemption.owner"),
])
def test_a_bad_preemption_key_is_named(text, key):
    with pytest.raises(PolicyError) as caught:
        load_policy(text)
    assert caught.value.key == key


def test_a_tenant_under_its_minimum_share_reclaims_at_its_own_priority_from_those_above_theirs():
    running = [Running(key=1, priority="normal", gpus=8, since=T, tenant="biology"),
               Running(key=2, priority="normal", gpus=8, since=T - timedelta(minutes=9), tenant="biology"),
               Running(key=3, priority="normal", gpus=4, since=T, tenant="chemistry")]
    # biology holds 16, guaranteed 4: 12 above; chemistry holds 4, guaranteed 4: nothing above
    chosen = victims(rule=RULE, priority="normal", needed_gpus=8, idle_gpus=0, running=running,
                     reclaim={"biology": 12, "chemistry": 0})
    assert [v.key for v in chosen] == [1]
    # 16 would take biology below its guarantee, and chemistry has nothing above its own
    assert victims(rule=RULE, priority="normal", needed_gpus=16, idle_gpus=0, running=running,
                   reclaim={"biology": 12, "chemistry": 0}) is None
    # without reclaim (the tenant is not under its share) the same priority is never taken
    assert victims(rule=RULE, priority="normal", needed_gpus=8, idle_gpus=0, running=running) is None
