"""The usage ledger: hand-computed GPU-seconds, project mapping, idempotency, collection."""
from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from accounting.models import UsageEntry, UsageWatermark
from accounting.sacct import iter_sacct_usage
from accounting.services import usage as usage_service
from accounting.services.usage import usage_collect, usage_ingest
from broker.backends.base import Unavailable
from broker.models import AuditRecord
from tests.accounting.helpers import T0, usage
from tests.factories import WorkloadFactory

pytestmark = pytest.mark.django_db


def test_multi_gpu_and_multi_node_jobs_match_hand_computed_gpu_seconds(trio, onprem, gpu_class):
    records = [
        usage("10", gpus=4, seconds=5400),   # one node, 4 GPUs, 1.5 h: 21 600 GPU-s
        usage("11", gpus=16, seconds=7200),  # two nodes x 8 GPUs, 2 h: 115 200 GPU-s
    ]
    usage_ingest(cluster=onprem, records=records)
    got = dict(UsageEntry.objects.values_list("job_id", "gpu_seconds"))
    assert got == {"10": 21_600, "11": 115_200}
    entry = UsageEntry.objects.get(job_id="11")
    assert entry.project == trio.project and entry.tenant == trio.tenant and entry.gpu_class == gpu_class


def test_sacct_lines_through_parser_into_ledger(trio, onprem, gpu_class):
    lines = ["JobID|JobName|Account|State|Start|End|ElapsedRaw|AllocTRES|Comment",
             "7|a|lattice|COMPLETED|2026-11-03T09:00:00|2026-11-03T10:00:00|3600|gres/gpu:a100=3,gres/gpu=3,node=1|",
             "8|b|lattice|COMPLETED|2026-11-03T09:00:00|2026-11-03T09:30:00|1800|gres/gpu:a100=16,gres/gpu=16,node=2|"]
    report = usage_ingest(cluster=onprem, records=iter_sacct_usage(lines, cluster=onprem.name))
    assert report.created == 2
    assert sum(UsageEntry.objects.values_list("gpu_seconds", flat=True)) == 3 * 3600 + 16 * 1800


def test_account_maps_by_slurm_account_or_namespace_and_unmatched_is_kept(trio, onprem, gpu_class):
    trio.project.slurm_account = "phys-lat"
    trio.project.save()
    report = usage_ingest(cluster=onprem, records=[
        usage("1", account="phys-lat"), usage("2", account="lattice", source="kueue"),
        usage("3", account="nobody-knows"), usage("4", account="nobody-knows")])
    by_job = {e.job_id: e for e in UsageEntry.objects.all()}
    assert by_job["1"].project == trio.project and by_job["2"].project == trio.project
    assert by_job["3"].project is None and by_job["3"].tenant is None
    assert report.unmatched_accounts == {"nobody-knows": 2}
    assert report.discrepancies == ["account 'nobody-knows' matches no project (2 job(s))"]


def test_reading_the_same_period_twice_adds_nothing(trio, onprem, gpu_class, settings):
    settings.GPUBROKER_ACCOUNTING_CHUNK = 2  # several chunks, same answer
    records = [usage(str(i), start=T0 + timedelta(minutes=i)) for i in range(5)]
    first = usage_ingest(cluster=onprem, records=records)
    before = list(UsageEntry.objects.order_by("job_id").values_list("job_id", "gpu_seconds", "end"))
    again = usage_ingest(cluster=onprem, records=records)
    assert (first.created, again.created, again.updated, again.unchanged) == (5, 0, 0, 5)
    assert list(UsageEntry.objects.order_by("job_id").values_list("job_id", "gpu_seconds", "end")) == before


def test_running_job_is_updated_then_final(trio, onprem, gpu_class):
    usage_ingest(cluster=onprem, records=[usage("9", seconds=None)])
    assert UsageEntry.objects.get().end is None
    usage_ingest(cluster=onprem, records=[usage("9", seconds=1800)])
    entry = UsageEntry.objects.get()
    assert entry.end == T0 + timedelta(seconds=1800) and entry.gpu_seconds == 2 * 1800
    report = usage_ingest(cluster=onprem, records=[usage("9", seconds=9999), usage("9", seconds=None)])
    entry.refresh_from_db()
    assert entry.gpu_seconds == 2 * 1800 and report.updated == 0 and UsageEntry.objects.count() == 1


def test_workload_linked_by_uid_or_destination_job_id(trio, onprem, gpu_class):
    by_uid = WorkloadFactory(project=trio.project, gpu_class=gpu_class, uid="wl-00000000000000a1")
    by_job = WorkloadFactory(project=trio.project, gpu_class=gpu_class, cluster=onprem, destination_job_id="77")
    usage_ingest(cluster=onprem, records=[usage("76", workload_id=by_uid.uid), usage("77")])
    assert UsageEntry.objects.get(job_id="76").workload == by_uid
    assert UsageEntry.objects.get(job_id="77").workload == by_job


def test_watermark_is_the_last_ended_job_and_ingest_is_audited(trio, onprem, gpu_class):
    usage_ingest(cluster=onprem, records=[usage("1", seconds=600), usage("2", seconds=1200), usage("3", seconds=None)])
    assert UsageWatermark.objects.get(cluster=onprem).last_end == T0 + timedelta(seconds=1200)
    assert AuditRecord.objects.filter(action="accounting.usage_ingest", cluster="hpc").count() == 1


class FakeBackend:
    def __init__(self, records=(), fail_after: int | None = None):
        self.records, self.fail_after, self.since = list(records), fail_after, None

    def usage(self, since):
        self.since = since
        for i, r in enumerate(self.records):
            if self.fail_after is not None and i >= self.fail_after:
                raise Unavailable("connection reset")
            yield r


def test_collect_reads_since_the_watermark(trio, onprem, gpu_class, monkeypatch, settings):
    settings.GPUBROKER_ACCOUNTING_OVERLAP_S = 600
    usage_ingest(cluster=onprem, records=[usage("1", seconds=3600)])
    backend = FakeBackend([usage("1", seconds=3600), usage("2", seconds=60)])
    monkeypatch.setattr(usage_service, "backend_for", lambda cluster: backend)
    report = usage_collect(cluster_id=onprem.id)
    assert not report.stale and report.ingest.created == 1 and report.ingest.unchanged == 1
    assert backend.since == T0 + timedelta(seconds=3600 - 600)
    assert UsageWatermark.objects.get().last_collected_at is not None


def test_unavailable_cluster_is_stale_and_nothing_is_written(trio, onprem, gpu_class, monkeypatch, settings):
    settings.GPUBROKER_ACCOUNTING_CHUNK = 1  # the first record is already committed by its chunk...
    usage_ingest(cluster=onprem, records=[usage("1", seconds=None)])
    backend = FakeBackend([usage("1", seconds=600), usage("2"), usage("3")], fail_after=2)
    monkeypatch.setattr(usage_service, "backend_for", lambda cluster: backend)
    report = usage_collect(cluster_id=onprem.id)
    # ...and still rolled back: the running job is not charged as ended
    assert report.stale and "connection reset" in report.error
    assert list(UsageEntry.objects.values_list("job_id", "end")) == [("1", None)]
    assert not UsageWatermark.objects.exists()


def test_backend_disabled_is_stale_too(trio, onprem, settings):
    settings.GPUBROKER_ENABLE_SLURM = False
    report = usage_collect(cluster_id=onprem.id)
    assert report.stale and "disabled" in report.error


def test_fast_time_adapter_stores_what_django_would(trio, onprem, gpu_class):
    from django.db import connection

    from accounting.services.usage import _time_adapter

    _db_time = _time_adapter()
    for moment in (T0, T0.astimezone(timezone(timedelta(hours=-8))), T0.replace(microsecond=123456)):
        assert _db_time(moment) == connection.ops.adapt_datetimefield_value(moment)
    usage_ingest(cluster=onprem, records=[usage("1", start=T0.replace(microsecond=5))])
    entry = UsageEntry.objects.get()
    assert entry.start == T0.replace(microsecond=5)
    assert UsageEntry.objects.filter(start__gte=T0, end__lt=T0 + timedelta(seconds=3601)).count() == 1
