"""One test (or a few) per filter rule; each checks the rule name and the message."""
from __future__ import annotations

from broker.backends.base import PoolInventory
from broker.backends.kube.settings import BackendSettings
from broker.backends.kube.inventory import node_entries
from broker.placement import TenantPolicy
from broker.placement.filters import filter_freshness
from broker.placement.results import RULES

H100, A100_80, A100_40 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB"
L4 = "NVIDIA L4"


def test_rules_are_named_in_order():
    assert RULES[:3] == ("policy", "quota", "gpu_compat")
    assert RULES[-1] == "topology"


def test_policy_tenant_may_not_use_class(kit):
    policy = kit.policy(tenants={"t": TenantPolicy("t", gpu_classes=("l4",))})
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))], policy=policy)
    result = kit.place(fleet, kit.spec(gpu_class="h100"))
    assert result.excluded["a"].rule == "policy"
    assert "may not use GPU class h100" in result.excluded["a"].message
    assert result.reason == "policy"


def test_policy_tenant_may_not_use_region(kit):
    policy = kit.policy(tenants={"*": TenantPolicy("*", regions=("eu",))})
    snaps = [kit.snap("eu", kit.pool("eu", [8])), kit.snap("us", kit.pool("us", [8]))]
    facts = [kit.facts("eu", region="eu-west-1"), kit.facts("us", region="us-east-1")]
    result = kit.place(kit.fleet(snaps, facts, policy), kit.spec())
    assert [c.cluster for c in result.ranked] == ["eu"]
    assert result.excluded["us"].rule == "policy"
    assert "region us-east-1" in result.excluded["us"].message


def test_policy_models_only_spec_cannot_reach_a_forbidden_class(kit):
    policy = kit.policy(tenants={"t": TenantPolicy("t", gpu_classes=("l4",))})
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8], model=H100))], policy=policy)
    result = kit.place(fleet, kit.spec(gpu_class="", gpu_models=(H100,)))
    assert result.excluded["a"].rule == "policy"


def test_unknown_tenant_without_star_entry_is_denied(kit):
    policy = kit.policy(tenants={"known": TenantPolicy("known")})
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))], policy=policy)
    assert kit.place(fleet, kit.spec(), tenant="stranger").excluded["a"].rule == "policy"
    assert kit.place(fleet, kit.spec(), tenant="known").ranked


def test_quota_below_gang_excludes_everything_as_policy(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8])), kit.snap("b", kit.pool("b", [8]))])
    spec = kit.spec(gpus_per_worker=4, workers=2)
    result = kit.place(fleet, spec, quota=7)
    assert {e.rule for e in result.excluded.values()} == {"quota"}
    assert "needs 8 GPUs, 7 left" in result.excluded["a"].message
    assert result.reason == "policy"
    assert kit.place(fleet, spec, quota=8).ranked


def test_quota_keeps_earlier_policy_exclusions(kit):
    policy = kit.policy(tenants={"*": TenantPolicy("*", regions=("eu",))})
    snaps = [kit.snap("eu", kit.pool("eu", [8])), kit.snap("us", kit.pool("us", [8]))]
    facts = [kit.facts("eu"), kit.facts("us", region="us-east-1")]
    result = kit.place(kit.fleet(snaps, facts, policy), kit.spec(), quota=0)
    assert result.excluded["us"].rule == "policy"
    assert result.excluded["eu"].rule == "quota"


def test_gpu_compat_model_not_in_class(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8], model=L4, memory=24))])
    result = kit.place(fleet, kit.spec(gpu_class="h100"))
    assert result.excluded["a"].rule == "gpu_compat"
    assert "NVIDIA L4" in result.excluded["a"].message


def test_gpu_compat_accepted_models_without_class(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8], model=L4, memory=24))])
    # model names are normalised: case, dashes and an 'NVIDIA' prefix do not matter
    result = kit.place(fleet, kit.spec(gpu_class="", gpu_models=("l4",)))
    assert [c.cluster for c in result.ranked] == ["a"]


def test_gpu_memory_class_minimum(kit):
    # a bare "A100" model string belongs to a100-80gb only with 80 GB of memory
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8], model="A100", memory=40))])
    result = kit.place(fleet, kit.spec(gpu_class="a100-80gb"))
    assert result.excluded["a"].rule == "gpu_memory"
    assert "needs 80 GB" in result.excluded["a"].message
    assert kit.place(fleet, kit.spec(gpu_class="a100-40gb")).ranked


def test_gpu_memory_spec_minimum(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8], model=A100_40, memory=40))])
    result = kit.place(fleet, kit.spec(gpu_class="a100-40gb", min_gpu_memory_gb=48))
    assert result.excluded["a"].rule == "gpu_memory"
    assert "offers 40 GB" in result.excluded["a"].message


def test_gpu_memory_of_a_mig_slice_is_the_slice(kit):
    pool = kit.pool("a", [7], model=A100_80, part="1g.10gb", total=7)
    fleet = kit.fleet([kit.snap("a", pool)])
    spec = kit.spec(gpu_class="a100-80gb", mig_profile="1g.10gb", min_gpu_memory_gb=20)
    assert kit.place(fleet, spec).excluded["a"].rule == "gpu_memory"


def test_partitioning_mig_profile_must_match_exactly(kit):
    snaps = [kit.snap("mig1", kit.pool("mig1", [7], model=A100_80, part="1g.10gb", total=7)),
             kit.snap("mig3", kit.pool("mig3", [2], model=A100_80, part="3g.40gb", total=2)),
             kit.snap("whole", kit.pool("whole", [8], model=A100_80))]
    fleet = kit.fleet(snaps)
    mig = kit.place(fleet, kit.spec(gpu_class="a100-80gb", mig_profile="1g.10gb"))
    assert [c.cluster for c in mig.ranked] == ["mig1"]
    assert mig.excluded["mig3"].rule == "partitioning"
    assert "3g.40gb" in mig.excluded["mig3"].message
    assert mig.excluded["whole"].rule == "partitioning"
    whole = kit.place(fleet, kit.spec(gpu_class="a100-80gb"))
    assert [c.cluster for c in whole.ranked] == ["whole"]
    assert whole.excluded["mig1"].rule == "partitioning"


def test_residency_region_family(kit):
    snaps = [kit.snap(n, kit.pool(n, [8])) for n in ("eu", "us", "onprem")]
    facts = [kit.facts("eu", region="eu-central-1"), kit.facts("us", region="us-east-1"),
             kit.facts("onprem", region="onprem-eu")]
    result = kit.place(kit.fleet(snaps, facts), kit.spec(residency=("eu", "onprem-eu")))
    assert sorted(c.cluster for c in result.ranked) == ["eu", "onprem"]
    assert result.excluded["us"].rule == "residency"
    assert "outside the job's residency" in result.excluded["us"].message


def test_residency_alone_excluding_everything_is_policy(kit):
    fleet = kit.fleet([kit.snap("us", kit.pool("us", [8]))],
                      [kit.facts("us", region="us-east-1")])
    assert kit.place(fleet, kit.spec(residency=("eu",))).reason == "policy"


def test_data_access_needs_a_route(kit):
    snaps = [kit.snap(n, kit.pool(n, [8])) for n in ("local", "remote", "cut")]
    facts = [kit.facts("local", data_locations=("nfs://lab",)),
             kit.facts("remote", bandwidth_gbps={"nfs://lab": 10.0}),
             kit.facts("cut", default_bandwidth_gbps=0.0)]
    result = kit.place(kit.fleet(snaps, facts), kit.spec(data_location="nfs://lab"))
    assert sorted(c.cluster for c in result.ranked) == ["local", "remote"]
    assert result.excluded["cut"] .rule == "data_access"


def test_health_and_draining(kit):
    snaps = [kit.snap(n, kit.pool(n, [8])) for n in ("sick", "drain")]
    facts = [kit.facts("sick", healthy=False), kit.facts("drain", draining=True)]
    result = kit.place(kit.fleet(snaps, facts), kit.spec())
    assert result.excluded["sick"].rule == "health"
    assert result.excluded["drain"].rule == "draining"
    assert result.reason == "unavailable"


def test_unhealthy_and_draining_nodes_hold_no_free_gpus(kit):
    pool = kit.pool("a", [8, 8])
    nodes = (pool.nodes[0].__class__(**{**pool.nodes[0].__dict__, "healthy": False}),
             pool.nodes[1].__class__(**{**pool.nodes[1].__dict__, "draining": True}))
    pool = pool.__class__(pool.name, pool.gpu_model, pool.gpu_memory_gb, pool.partitioning,
                          pool.owner, nodes)
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec())
    assert result.excluded["a"].rule == "topology"
    assert "never" in result.excluded["a"].message


def test_stale_inventory_excluded_with_its_age(kit):
    snaps = [kit.snap("old", kit.pool("old", [8]), age_s=400),
             kit.snap("new", kit.pool("new", [8]), age_s=10)]
    result = kit.place(kit.fleet(snaps), kit.spec())
    assert [c.cluster for c in result.ranked] == ["new"]
    assert result.excluded["old"].rule == "stale"
    assert "400s old" in result.excluded["old"].message
    assert "limit 300s" in result.excluded["old"].message


def test_all_stale_means_unavailable_not_idle(kit):
    snaps = [kit.snap("old", kit.pool("old", [8]), age_s=301)]
    result = kit.place(kit.fleet(snaps), kit.spec())
    assert result.reason == "unavailable"


def test_cluster_that_never_reported_is_stale(kit):
    fleet = kit.fleet([], [kit.facts("silent")])
    result = kit.place(fleet, kit.spec())
    assert result.excluded["silent"].rule == "stale"
    assert "no inventory" in result.excluded["silent"].message
    assert result.reason == "unavailable"


def test_freshness_filter_alone(kit):
    from datetime import timedelta
    assert filter_freshness(kit.now, kit.now, 300) is None
    exc = filter_freshness(kit.now - timedelta(seconds=3600), kit.now, 300)
    assert exc is not None and exc.rule == "stale" and "3600s old" in exc.message


def test_the_first_rule_is_reported(kit):
    # an L4 cluster that is also stale and unhealthy: gpu_compat comes first
    snaps = [kit.snap("a", kit.pool("a", [8], model=L4, memory=24), age_s=999)]
    result = kit.place(kit.fleet(snaps, [kit.facts("a", healthy=False)]), kit.spec())
    assert result.excluded["a"].rule == "gpu_compat"
    # compatible but unhealthy and stale: health comes before staleness
    snaps = [kit.snap("b", kit.pool("b", [8]), age_s=999)]
    result = kit.place(kit.fleet(snaps, [kit.facts("b", healthy=False)]), kit.spec())
    assert result.excluded["b"].rule == "health"


def test_cluster_with_several_pools_reports_the_pool_that_got_furthest(kit):
    snap = kit.snap("a", kit.pool("a", [8], name="l4", model=L4, memory=24),
                    kit.pool("a", [7], name="mig", part="1g.10gb", total=7))
    result = kit.place(kit.fleet([snap]), kit.spec())
    assert result.excluded["a"].rule == "partitioning"


def test_ownership_conflict_node_is_left_out(kit):
    shared = ["shared-0"]
    slurm = kit.pool("a", [8, 4], name="batch", owner="slurm", node_names=["shared-0", "a-1"])
    kueue = kit.pool("a", [8], name="k8s", owner="kueue", node_names=shared)
    fleet = kit.fleet([kit.snap("a", slurm, kueue)])
    assert ("a", "shared-0") in fleet.conflicts
    # the 8 free GPUs on the doubly claimed node are not counted
    result = kit.place(fleet, kit.spec(gpus_per_worker=8))
    # the batch pool got furthest (to the gang-fit check) and says why it fell short
    assert result.excluded["a"].rule == "topology"
    assert "1 node(s) left out, claimed by two schedulers" in result.excluded["a"].message
    ok = kit.place(fleet, kit.spec(gpus_per_worker=4))
    assert ok.ranked[0].assignment == ("a-1",)


def test_ownership_pool_with_every_node_conflicted(kit):
    slurm = kit.pool("a", [8], name="batch", owner="slurm", node_names=["shared-0"])
    kueue = kit.pool("a", [8], name="k8s", owner="kueue", node_names=["shared-0"])
    result = kit.place(kit.fleet([kit.snap("a", kueue, slurm)]), kit.spec(gpus_per_worker=8))
    assert result.excluded["a"].rule == "ownership"
    assert "shared-0" in result.excluded["a"].message
    assert result.reason == "unavailable"


def test_ownership_across_clusters_sharing_machines(kit):
    hpc = kit.snap("hpc", kit.pool("hpc", [8], owner="slurm", node_names=["gpu07"]))
    k8s = kit.snap("k8s", kit.pool("k8s", [8], owner="kueue", node_names=["gpu07"]))
    same_site = [kit.facts("hpc", node_domain="site1"), kit.facts("k8s", node_domain="site1")]
    result = kit.place(kit.fleet([hpc, k8s], same_site), kit.spec())
    assert result.excluded == {"hpc": result.excluded["hpc"], "k8s": result.excluded["k8s"]}
    assert {e.rule for e in result.excluded.values()} == {"ownership"}
    assert result.reason == "unavailable"
    # different sites: the same host name is two machines, no conflict
    assert len(kit.place(kit.fleet([hpc, k8s]), kit.spec()).ranked) == 2


def test_same_owner_in_two_pools_is_not_a_conflict(kit):
    a = kit.pool("a", [8], name="p1", owner="slurm", node_names=["n0"])
    b = kit.pool("a", [8], name="p2", owner="slurm", node_names=["n0"])
    fleet = kit.fleet([kit.snap("a", a, b)])
    assert not fleet.conflicts


def test_freshness_tolerates_a_naive_timestamp(kit):
    naive = kit.now.replace(tzinfo=None)
    assert filter_freshness(naive, kit.now, 300) is None


def test_a_whole_gpu_job_is_never_sent_to_a_time_sliced_pool(kit):
    # what the device plugin advertises for 2 A100s time-sliced 4 ways: 8 "nvidia.com/gpu"
    labels = {"nvidia.com/gpu.product": "A100-SHARED", "nvidia.com/gpu.memory": "81920",
              "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "4",
              "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    ts_node = {"metadata": {"name": "ts-0", "labels": labels}, "spec": {},
               "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                          "conditions": [{"type": "Ready", "status": "True"}]}}
    entries = node_entries(ts_node, {}, BackendSettings(), "kueue")
    shared = PoolInventory(name="a100", gpu_model="A100", gpu_memory_gb=80, partitioning=entries[0].partitioning,
                           owner="kueue", nodes=tuple(entries))
    fleet = kit.fleet([kit.snap("shared", shared), kit.snap("whole", kit.pool("whole", [2], model=A100_80))])
    result = kit.place(fleet, kit.spec(gpu_class="a100-80gb", gpus_per_worker=4))
    assert result.excluded["shared"].rule == "partitioning"  # 8 free "GPUs" there, none whole
    assert "offers time-slicing GPUs, the job needs whole" in result.excluded["shared"].message
    assert [c.cluster for c in result.ranked] == []  # the whole-GPU cluster has only 2 free: it waits
