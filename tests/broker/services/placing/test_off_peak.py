"""Off-peak work in the placing pass, on the broker's clock seam: it waits at the broker
with the window's opening in its reason, and starts as the window opens."""
from __future__ import annotations

from datetime import datetime, timezone

from broker import runtime
from broker.models import Workload
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing.cycle import waiting_place_pass

# a Wednesday, 19:00 in Berlin: the default policy's window there opens at 20:00 (19:00 UTC)
BEFORE = datetime(2026, 12, 2, 18, 0, tzinfo=timezone.utc)
OPENS = datetime(2026, 12, 2, 19, 0, tzinfo=timezone.utc)


def test_an_off_peak_job_waits_saying_when_the_window_opens_then_starts_as_it_opens(make_cluster, submit):
    instant = [BEFORE]
    with runtime.override(now=lambda: instant[0]):
        cluster = make_cluster("onprem")
        job = submit(off_peak=True)
        waiting_place_pass(now=instant[0])
        job = Workload.objects.get(id=job.id)
        assert (job.state, job.reason) == ("waiting", "waiting")
        assert "it asked to start off-peak: the off-peak window at eu-west (20:00-07:00 Europe/Berlin, " \
               "weekends all day) opens at 2026-12-02 19:00 UTC, in 1 h 0 min" in job.raw_reason

        looks = 0
        while (at := _retry_at(job)) < OPENS:  # each look when its pause ends, inventory fresh
            instant[0] = at
            cluster_sync_inventory(cluster_id=cluster.id)
            looks += waiting_place_pass(now=at).due
        assert at == OPENS and looks > 30  # the last pause (up to 120 s) ended as the window opened
        assert "opens at 2026-12-02 19:00 UTC, in 2 min" in Workload.objects.get(id=job.id).raw_reason  # its last look

        instant[0] = OPENS
        cluster_sync_inventory(cluster_id=cluster.id)
        report = waiting_place_pass(now=OPENS)
        assert report.due == 1 and Workload.objects.get(id=job.id).state == "reserved"


def test_a_job_that_did_not_ask_starts_at_peak(make_cluster, submit):
    with runtime.override(now=lambda: BEFORE):
        make_cluster("onprem")
        job = submit()
        waiting_place_pass(now=BEFORE)
        assert Workload.objects.get(id=job.id).state == "reserved"


def test_the_spec_form_and_api_take_off_peak(trio, quota, submit):
    assert submit(off_peak=True).spec["off_peak"] is True
    assert submit(name="other").spec["off_peak"] is False


def _retry_at(job: Workload) -> datetime:
    return datetime.fromisoformat(Workload.objects.get(id=job.id).placement["retry"]["at"])
