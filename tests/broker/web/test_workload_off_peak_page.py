"""The workload page and the API of a job that waits for its off-peak window."""
from __future__ import annotations

from datetime import datetime, timezone

from django.urls import reverse

from broker import runtime
from broker.services.placing.cycle import waiting_place_pass

WEDNESDAY_18_UTC = datetime(2026, 12, 2, 18, 0, tzinfo=timezone.utc)  # 19:00 in Berlin: peak


def test_an_off_peak_job_page_says_it_starts_off_peak_and_when_the_window_opens(trio, make_cluster, submit, login):
    with runtime.override(now=lambda: WEDNESDAY_18_UTC):
        make_cluster("onprem")
        workload = submit(off_peak=True)
        waiting_place_pass(now=WEDNESDAY_18_UTC)
    page = login(trio.member).get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert "starts off-peak only" in page
    assert "Waiting for a start time (an off-peak window)" in page
    assert "Broker says: onprem: it asked to start off-peak" in page
    assert "its off-peak window is closed now" in page and "opens at 2026-12-02 19:00 UTC, in 1 h 0 min" in page
    api = login(trio.member).get(f"/api/v1/workloads/{workload.id}/").json()
    assert api["local_reason"] == "waiting" and "opens at 2026-12-02 19:00 UTC" in api["raw_reason"]
    assert login(trio.outsider).get(reverse("workload-detail", args=[workload.id])).status_code == 404


def test_the_api_takes_off_peak_and_refuses_it_as_text_it_cannot_read(trio, quota, login):
    client = login(trio.member)
    body = {"project": trio.project.id, "name": "night", "command": "run", "gpu_class": "a100-80gb", "off_peak": True}
    made = client.post("/api/v1/workloads/", body, content_type="application/json")
    assert made.status_code == 201 and made.json()["spec"]["off_peak"] is True
    bad = client.post("/api/v1/workloads/", {**body, "name": "bad", "off_peak": "tonight"},
                      content_type="application/json")
    assert bad.status_code == 400 and "off_peak" in bad.json()["error"]["fields"]
    assert login(trio.outsider).post("/api/v1/workloads/", body, content_type="application/json").status_code == 404
