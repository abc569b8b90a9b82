"""A job whose pre-flight GPU check fails on a worker (``gpu_check``): its gang's attempt ends
there as "GPU check failed on worker N (node X)", the workload is placed again, not on that
node, the failed attempt is charged to nobody, and the node is blocked behind one escalation
(repeats folded into it) until the block ends or an admin resolves it."""
from __future__ import annotations

from datetime import timedelta

from django.test import override_settings
from django.urls import reverse

from accounting.chargeback import build_report
from accounting.models import UsageEntry
from accounting.services.usage import usage_collect
from broker import runtime
from broker.models import AuditRecord, Escalation, Reservation, Workload
from broker.selectors.node_blocks import blocked_nodes
from broker.services.following.gpu_check import node_block


def _first_node(sim, cluster: str) -> str:
    return sim.get(cluster).nodes[0].name


def test_a_failed_gpu_check_places_the_job_again_elsewhere_uncharged_with_the_node_blocked(
        make_cluster, submit, drive, sim, poll):
    cheap = make_cluster("cheap", flavor="kueue", nodes=[8], price="1.0")
    dear = make_cluster("dear", flavor="kueue", nodes=[8], price="3.0")
    bad = _first_node(sim, "cheap")
    sim.get("cheap").break_gpus(bad)
    workload = submit(gpus_per_worker=4, gpu_check=True)
    sim.set_duration(workload.uid, 600)
    workload = drive(workload)
    assert workload.placed_cluster == cheap  # the scheduler there counts the node healthy
    poll(cheap)
    first_job = workload.destination_job_id
    sim.advance(10)  # the check's seconds
    poll(cheap)
    workload.refresh_from_db()
    assert workload.state == "waiting", (workload.state, workload.raw_reason)
    said = (f"GPU check failed on worker 0 (node {bad}) at cheap: placed again, not on {bad}; "
            "this attempt is not charged")
    assert workload.raw_reason == said
    assert workload.destination_job_id == ""
    assert not Reservation.objects.filter(workload=workload, state__in=("active", "confirmed")).exists()
    record = AuditRecord.objects.get(workload=workload, action="workload.gpu_check_failed")
    assert record.inputs["transition"] == {"to": "waiting", "reason": "gpu_check_failed"}
    [escalation] = Escalation.objects.filter(kind="gpu_check")
    assert escalation.key == f"gpu-check:cheap:{bad}" and escalation.evidence["failures"] == 1
    assert bad in blocked_nodes()[cheap.id]

    workload = drive(workload)  # the only node at cheap is blocked: the dearer cluster
    assert workload.placed_cluster == dear, workload.raw_reason
    poll(dear)
    sim.advance(600)
    poll(dear)
    workload.refresh_from_db()
    assert workload.state == "completed"

    usage_collect(cluster_id=cheap.id)
    usage_collect(cluster_id=dear.id)
    entry = UsageEntry.objects.get(cluster=cheap, job_id=first_job)
    assert entry.waived and entry.gpu_seconds > 0  # the scheduler's record, charged to nobody
    month = runtime.now().date().replace(day=1)
    report = build_report(months=[month], tenant_ids={workload.tenant_id})
    charged = sum(r.onprem_seconds + r.cloud_seconds for r in report.rows)
    assert charged == UsageEntry.objects.get(cluster=dear).gpu_seconds == 4 * 600  # the run at dear alone


def test_the_clusters_page_shows_the_block_and_resolving_the_escalation_clears_it(
        make_cluster, sim, trio, login, submit):
    cluster = make_cluster("c1", flavor="kueue", nodes=[8])
    node = _first_node(sim, "c1")
    workload = submit(gpus_per_worker=4, gpu_check=True)
    escalation = node_block(cluster=cluster, node=node, reason=f"GPU check failed on worker 1 (node {node})",
                            workload=workload, job_id="j-1")
    body = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert 'data-blocked="c1"' in body and f"GPU check failed on worker 1 (node {node})" in body
    assert "Resolving this clears the block now" in login(trio.owner).get(reverse("escalation-list")).content.decode()
    outsider = login(trio.outsider).post(reverse("escalation-action", args=[escalation.id, "resolve"]),
                                         {"outcome": "not theirs"})
    assert outsider.status_code == 404 and node in blocked_nodes()[cluster.id]
    login(trio.owner).post(reverse("escalation-action", args=[escalation.id, "resolve"]),
                           {"outcome": "GPU reseated, checked"})
    assert blocked_nodes() == {}
    assert 'data-blocked="c1"' not in login(trio.member).get(reverse("cluster-list")).content.decode()


@override_settings(GPUBROKER_GPU_CHECK_BLOCK_S=600)
def test_a_repeat_failure_folds_into_the_nodes_escalation_and_the_block_expires(make_cluster, sim):
    cluster = make_cluster("c1", flavor="kueue", nodes=[8])
    node = _first_node(sim, "c1")
    first = node_block(cluster=cluster, node=node, reason="GPU check failed on worker 0 (node x)", workload=None,
                       job_id="j-1")
    again = node_block(cluster=cluster, node=node, reason="GPU check failed on worker 2 (node x)", workload=None,
                       job_id="j-2")
    assert again.id == first.id and Escalation.objects.filter(kind="gpu_check").count() == 1
    again.refresh_from_db()
    assert again.evidence["failures"] == 2 and again.evidence["last"]["job"] == "j-2"
    assert node in blocked_nodes()[cluster.id]
    assert blocked_nodes(now=runtime.now() + timedelta(seconds=601)) == {}


def test_placed_again_on_the_same_cluster_its_scheduler_is_told_to_avoid_the_blocked_node(
        make_cluster, submit, drive, sim, poll):
    cluster = make_cluster("c1", flavor="kueue", nodes=[8, 16])
    tight, roomy = (n.name for n in sim.get("c1").nodes)
    sim.get("c1").break_gpus(tight)  # the scheduler's best fit for 8 GPUs: the 8-GPU node
    workload = submit(gpus_per_worker=8, gpu_check=True)
    sim.set_duration(workload.uid, 600)
    workload = drive(workload)
    poll(cluster)
    assert [n for n, _ in sim.get("c1").job(workload.destination_job_id).placement] == [tight]
    sim.advance(10)
    poll(cluster)
    workload = drive(Workload.objects.get(id=workload.id))
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "running", (workload.state, workload.raw_reason)
    job = sim.get("c1").job(workload.destination_job_id)
    assert job.request.exclude_nodes == (tight,)
    assert [n for n, _ in job.placement] == [roomy]


def test_a_blocked_nodes_gpus_are_not_counted_idle_from_the_next_report_on(make_cluster, sim, trio, login, submit):
    from broker.models import GpuPool
    from broker.services.fleet.inventory import cluster_sync_inventory

    cluster = make_cluster("c1", flavor="kueue", nodes=[8, 8])
    node = _first_node(sim, "c1")
    assert sum(p.gpus_idle for p in GpuPool.objects.filter(cluster=cluster)) == 16
    escalation = node_block(cluster=cluster, node=node, reason=f"GPU check failed on worker 0 (node {node})",
                            workload=submit(gpus_per_worker=1, gpu_check=True), job_id="j-1")
    cluster_sync_inventory(cluster_id=cluster.id)
    assert sum(p.gpus_idle for p in GpuPool.objects.filter(cluster=cluster)) == 8
    body = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert 'data-nodes-out="c1"' in body and "blocked by the broker until" in body
    login(trio.owner).post(reverse("escalation-action", args=[escalation.id, "resolve"]), {"outcome": "reseated"})
    cluster_sync_inventory(cluster_id=cluster.id)
    assert sum(p.gpus_idle for p in GpuPool.objects.filter(cluster=cluster)) == 16
