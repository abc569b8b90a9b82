"""The workload page and the API say when a job was preempted at its destination and what
followed; the timeline names the job that was preempted."""
from __future__ import annotations

from django.urls import reverse

from broker.models import Workload


def test_a_preempted_job_says_so_on_its_page_and_in_the_api(trio, make_cluster, submit, drive, sim, poll, login):
    onprem = make_cluster("onprem", nodes=[8])
    workload = drive(submit(gpus_per_worker=4))
    poll(onprem)
    workload.refresh_from_db()
    first_job = workload.destination_job_id
    sim.get("onprem").preempt(first_job)
    poll(onprem)
    workload = drive(Workload.objects.get(id=workload.id))

    page = login(trio.member).get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert "Preempted 1 time at its destination by other work, and queued or placed again" in page
    assert f"preempted at onprem (preempted by another job): placed again (job {first_job})" in page
    api = login(trio.member).get(f"/api/v1/workloads/{workload.id}/").json()
    assert api["preemptions"] == 1 and api["state"] == "queued"
    assert login(trio.outsider).get(reverse("workload-detail", args=[workload.id])).status_code == 404
