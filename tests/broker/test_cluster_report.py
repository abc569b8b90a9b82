"""A node's inventory is stored from its dataclass and read back through it."""

from __future__ import annotations

from broker.cluster_report import NodeInventory, QueueStats

POOL = {"gpu_model": "A100", "gpu_memory_gb": 80, "partitioning": "whole", "owner": "slurm"}


def test_a_stored_node_reads_back_as_it_was_written():
    node = NodeInventory("n1", "H100", 94, 8, 8, 3, "1g.10gb", False, True, "rack-2", "kube")
    stored = node.to_json()
    assert stored["total"] == 8 and stored["domain"] == "rack-2"  # the keys rows have always had
    assert NodeInventory.from_json(stored, **POOL) == node


def test_an_older_row_takes_what_it_lacks_from_its_pool():
    node = NodeInventory.from_json({"name": "n1", "total": 4, "allocatable": 4, "allocated": 1}, **POOL)
    assert (node.gpu_model, node.gpu_memory_gb, node.partitioning, node.owner) == ("A100", 80, "whole", "slurm")
    assert node.healthy and not node.draining and node.interconnect_domain == ""


def test_gpus_promised_since_the_report_count_as_allocated_up_to_what_the_node_allocates():
    stored = NodeInventory("n1", "A100", 80, 8, 6, 2).to_json()
    assert NodeInventory.from_json(stored, **POOL, promised={"n1": 3}).gpus_allocated == 5
    assert NodeInventory.from_json(stored, **POOL, promised={"n1": 9}).gpus_allocated == 6
    assert NodeInventory.from_json(stored, **POOL, promised={"n2": 9}).gpus_allocated == 2


def test_gpus_ahead_under_fair_share_leave_out_accounts_below_the_jobs_own():
    queue = QueueStats(4, 30, pending_gpus_by_scope=(("heavy", 16), ("light", 8), ("peer", 4)))
    points = {"heavy": 10.0, "light": 90.0, "peer": 90.0}
    assert queue.gpus_ahead(points, ("light",)) == 30 - 16  # heavy waits behind; peer (tied) and unlisted 2 do not
    assert queue.gpus_ahead(points, ("heavy",)) == 30
    assert queue.gpus_ahead(points, ("unknown",)) == 30  # no factor: nothing says it goes first
    assert queue.gpus_ahead({}, ("light",)) == 30  # no fair share: submission order
    assert QueueStats(2, 10).gpus_ahead(points, ("light",)) == 10  # not reported per account


def test_a_nodes_health_reason_is_stored_and_read_back():
    node = NodeInventory("n1", "H100", 94, 8, 6, 0, health_reason="2 of 8 GPUs not allocatable")
    stored = node.to_json()
    assert stored["reason"] == "2 of 8 GPUs not allocatable"
    back = NodeInventory.from_json(stored, gpu_model="H100", gpu_memory_gb=94, partitioning="whole", owner="k")
    assert back.health_reason == "2 of 8 GPUs not allocatable" and back.gpus_free == 6
    assert "reason" not in NodeInventory("n2", "H100", 94, 8, 8, 0).to_json()  # a healthy node's row is unchanged
