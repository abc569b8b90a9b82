"""A restarted demo continues its simulated job numbers after those its database holds, so the
first dispatch after a restart is not refused as a second claim on a recorded job id."""
from __future__ import annotations

from broker.models import DispatchAttempt, Workload
from demo.job_numbers import FIRST, continue_numbering, highest_numbers


def _restart(sim, name: str):
    """What a restart of `make demo` does to the in-process fleet: the cluster is built again,
    empty, numbering from the start."""
    old = sim.get(name)
    sim.add_cluster(name, old.flavor, nodes=list(old.nodes))
    return sim.get(name)


def test_after_a_restart_dispatch_goes_on_with_new_job_numbers(make_cluster, submit, drive, sim):
    cluster = make_cluster("onprem", nodes=[8, 8])
    before = [drive(submit(name=f"before-{i}", gpus_per_worker=1)) for i in range(3)]
    assert [w.state for w in before] == ["queued"] * 3
    recorded = {w.destination_job_id for w in before}

    _restart(sim, "onprem")
    starts = continue_numbering(sim)
    after = [drive(submit(name=f"after-{i}", gpus_per_worker=1)) for i in range(3)]

    assert starts["onprem"] == max(int(j) for j in recorded) + 1
    assert [w.state for w in after] == ["queued"] * 3  # none stuck in dispatching
    assert not {w.destination_job_id for w in after} & recorded
    assert not Workload.objects.filter(state="dispatching").exists()
    assert DispatchAttempt.objects.filter(state="started").count() == 0
    assert cluster.name == "onprem"


def test_without_a_restart_the_numbering_starts_where_it_always_did(make_cluster, sim):
    make_cluster("fresh")
    assert highest_numbers() == {}
    assert continue_numbering(sim)["fresh"] == FIRST


def test_kubernetes_style_job_ids_are_read_by_their_trailing_number(make_cluster, submit, drive, sim):
    make_cluster("kube", flavor="kueue")
    workload = drive(submit(name="k", gpus_per_worker=1))
    assert "/" in workload.destination_job_id
    number = int(workload.destination_job_id.rsplit("-", 1)[1])
    assert highest_numbers()["kube"] == number
