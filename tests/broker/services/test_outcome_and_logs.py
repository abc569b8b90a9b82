"""Outcome and output on the fleet simulator: how a job ended reaches the workload, its
page and the API; its output is paged, tailed and followed; only its own people read it."""
from __future__ import annotations

import pytest

from broker.backends.sim import SimulatorFleet


@pytest.fixture
def running(make_cluster, submit, drive, poll):
    """A 4-worker job (2 GPUs each) running on a Kubernetes-flavoured simulated cluster."""
    def _running(flavor: str = "kueue", workers: int = 4, **spec):
        cluster = make_cluster(f"sim-{flavor}", flavor=flavor, nodes=[8, 8])
        workload = drive(submit(workers=workers, **spec))
        poll(cluster)
        workload.refresh_from_db()
        assert workload.state == "running"
        return cluster, workload
    return _running


def test_a_pod_killed_for_memory_is_reported_as_out_of_memory_on_its_worker(running, poll, login, trio):
    cluster, workload = running("kueue")
    sim = SimulatorFleet.instance().get(cluster.name)
    node = dict(enumerate(n for n, g in sim.job(workload.destination_job_id).placement for _ in range(g // 2)))[3]
    sim.kill_for_memory(workload.destination_job_id, worker=3)
    poll(cluster)
    workload.refresh_from_db()

    assert workload.state == "failed"
    assert workload.outcome["end_reason"] == "OOMKilled" and workload.outcome["worker"] == "3"
    assert workload.outcome["summary"] == f"ran out of memory on worker 3 (node {node})"
    body = login(trio.member).get(f"/api/v1/workloads/{workload.id}/").json()
    assert body["outcome"]["summary"].startswith("ran out of memory on worker 3")
    assert body["outcome"]["exit_code"] == 137 and body["outcome"]["gpu_hours"] is not None
    page = login(trio.member).get(f"/workloads/{workload.id}/").content.decode()
    assert "ran out of memory on worker 3" in page and "OOMKilled" in page


def test_slurm_flavour_speaks_slurm_words_for_the_same_kill(running, poll):
    cluster, workload = running("slurm", workers=1)
    SimulatorFleet.instance().get(cluster.name).kill_for_memory(workload.destination_job_id, worker=0)
    poll(cluster)
    workload.refresh_from_db()
    assert workload.outcome["end_reason"] == "OUT_OF_MEMORY"
    assert workload.outcome["summary"].startswith("ran out of memory on worker 0")


def test_a_job_past_its_time_limit_says_so_in_plain_words(make_cluster, submit, drive, poll, sim):
    cluster = make_cluster("sim-slurm", flavor="slurm")
    workload = submit(time_limit_minutes=1)
    sim.set_duration(workload.uid, 600)
    workload = drive(workload)
    sim.clock.advance(120)
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "failed"
    assert workload.outcome["summary"] == "stopped at its time limit (TIMEOUT)"


def test_output_is_tailed_paged_and_followed_until_the_job_ends(running, poll, login, trio, sim):
    cluster, workload = running("kueue", workers=2)
    sim.clock.advance(600)  # ten simulated minutes: a start line and ten steps
    client = login(trio.member)
    url = f"/api/v1/workloads/{workload.id}/logs/"

    tail = client.get(url, {"tail": 3, "worker": 1}).json()
    assert tail["lines"][-1].startswith("worker 1 step") and len(tail["lines"]) == 3
    assert tail["workers"] == ["0", "1"] and not tail["ended"]
    first = client.get(url, {"offset": 0, "limit": 4}).json()
    assert first["lines"][0].startswith("worker 0 starting") and first["more"] and first["next_offset"] == 4
    following = client.get(f"/workloads/{workload.id}/logs/", {"offset": 11}, HTTP_HX_REQUEST="true")
    assert following.status_code == 200 and b"hx-trigger" in following.content  # still running: keeps asking

    sim.clock.advance(10_000)
    poll(cluster)
    last = client.get(f"/workloads/{workload.id}/logs/", {"offset": 11}, HTTP_HX_REQUEST="true")
    assert last.status_code == 286 and b"exited with code 0" in last.content  # ended: polling stops


def test_the_workload_page_shows_the_last_lines_and_links_the_output(running, login, trio, sim):
    _, workload = running("kueue", workers=1)
    sim.clock.advance(300)
    page = login(trio.member).get(f"/workloads/{workload.id}/").content.decode()
    assert "worker 0 step 5: loss" in page and f"/workloads/{workload.id}/logs/" in page


def test_outsiders_get_404_for_output_and_bad_values_get_a_named_400(running, login, trio):
    _, workload = running("kueue", workers=2)
    outsider = login(trio.outsider)
    assert outsider.get(f"/api/v1/workloads/{workload.id}/logs/").status_code == 404
    assert outsider.get(f"/workloads/{workload.id}/logs/").status_code == 404
    member = login(trio.member)
    for query, field in (({"tail": "0"}, "tail"), ({"worker": "2"}, "worker"), ({"offset": "-1"}, "offset"),
                         ({"limit": "x"}, "limit"), ({"tail": 5, "offset": 1}, "tail"), ({"lines": 3}, "lines")):
        response = member.get(f"/api/v1/workloads/{workload.id}/logs/", query)
        assert response.status_code == 400 and field in response.json()["error"]["fields"], query
        assert member.get(f"/workloads/{workload.id}/logs/", query).status_code == 400


def test_output_the_cluster_no_longer_has_is_said_plainly(running, login, trio, sim):
    cluster, workload = running("kueue", workers=1)
    sim.get(cluster.name).job(workload.destination_job_id).lost = True
    client = login(trio.member)
    body = client.get(f"/api/v1/workloads/{workload.id}/logs/").json()
    assert body["gone"] and not body["available"] and "no longer has this job's output" in body["note"]
    assert "no longer has this job&#x27;s output" in client.get(f"/workloads/{workload.id}/logs/").content.decode()


def test_a_silent_cluster_is_said_so_and_the_page_does_not_wait_on_it(running, login, trio, sim):
    cluster, workload = running("kueue", workers=1)
    sim.get(cluster.name).set_faults(unreachable=True)
    client = login(trio.member)
    response = client.get(f"/api/v1/workloads/{workload.id}/logs/", {"tail": 5})
    assert response.status_code == 503 and response.json()["error"]["code"] == "destination_unavailable"
    type(cluster).objects.filter(id=cluster.id).update(health="stale")
    assert "is not answering" in client.get(f"/workloads/{workload.id}/").content.decode()
