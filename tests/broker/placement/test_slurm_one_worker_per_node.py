"""On Slurm each worker of a gang takes a node of its own (the backend asks --nodes=workers
with one task a node), so a gang fits only where that many nodes have room; Kubernetes
packs a gang's pods onto as few nodes as hold them.  Found by the Slurm calibration: a gang
of two 2-GPU workers started on one node in the simulator and on two in Slurm, later."""
from __future__ import annotations


def test_a_gang_that_fits_on_one_node_waits_on_slurm_until_as_many_nodes_have_room(kit):
    snaps = [kit.snap("slurm", kit.pool("slurm", [4, 0])), kit.snap("kube", kit.pool("kube", [4, 0]))]
    facts = [kit.facts("slurm", one_worker_per_node=True), kit.facts("kube")]
    result = kit.place(kit.fleet(snaps, facts), kit.spec(gpus_per_worker=2, workers=2))
    assert [c.cluster for c in result.ranked] == ["kube"]
    assert result.ranked[0].assignment == ("kube-gpu-n0", "kube-gpu-n0")  # both pods on the one node
    assert result.excluded["slurm"].message.startswith("pool gpu: 1 of 2 workers of 2 GPUs fit now")


def test_on_slurm_the_gang_gets_as_many_nodes_as_workers(kit):
    snap = kit.snap("slurm", kit.pool("slurm", [4, 2, 8]))
    result = kit.place(kit.fleet([snap], [kit.facts("slurm", one_worker_per_node=True)]),
                       kit.spec(gpus_per_worker=2, workers=3))
    assert result.best is not None
    assert len(set(result.best.assignment)) == 3


def test_a_slurm_pool_with_fewer_nodes_than_workers_never_holds_the_gang(kit):
    snap = kit.snap("slurm", kit.pool("slurm", [8, 8]))
    result = kit.place(kit.fleet([snap], [kit.facts("slurm", one_worker_per_node=True)]),
                       kit.spec(gpus_per_worker=1, workers=3))
    assert result.excluded["slurm"].rule == "never_fits"
    assert "at most 2 workers even when idle" in result.excluded["slurm"].message


def test_registered_slurm_clusters_and_simulated_slurm_place_a_worker_per_node():
    from broker.models import Cluster
    from broker.services.placing.fleet_view import cluster_facts

    def facts(kind, **config):
        return cluster_facts(Cluster(name="c", kind=kind, config=config))

    assert facts("slurm").one_worker_per_node and facts("simulator", flavor="slurm").one_worker_per_node
    assert not facts("kueue").one_worker_per_node and not facts("simulator", flavor="volcano").one_worker_per_node
