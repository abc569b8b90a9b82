"""The streaming sacct parser on the real ``sacct -P -X`` sample from the Slurm test cluster."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from accounting.sacct import iter_sacct_usage, parse_gpu_tres, sacct_usage

# the real sample from ../shared/slurm/samples, kept in the repository with the Slurm fixtures
SAMPLE = Path(__file__).resolve().parents[1] / "broker" / "backends" / "slurm" / "fixtures" / "sacct-P-X.txt"

# JobID -> (GPUs, GPU-seconds) worked out by hand from AllocTRES gres/gpu x ElapsedRaw.
EXPECTED = {
    "1": (2, 2 * 5),
    "2": (2, 2 * 5),
    "3": (2, 2 * 5),    # multinode: node=2, one GPU per node; gres/gpu is the job total
    "6": (4, 4 * 30),
    "7": (1, 1 * 5),
    "9": (1, 1 * 3),
}


def test_real_sample_gives_hand_computed_gpu_seconds():
    with SAMPLE.open() as f:
        records = list(iter_sacct_usage(f, cluster="ci"))
    assert {r.job_id: (r.gpus, r.gpu_seconds) for r in records} == EXPECTED
    first = records[0]
    assert first.gpu_model == "a100" and first.account == "root" and first.source == "slurm"
    assert first.start == datetime(2026, 11, 29, 22, 26, 29, tzinfo=timezone.utc)
    assert first.end == datetime(2026, 11, 29, 22, 26, 34, tzinfo=timezone.utc)


def test_multi_node_job_counts_every_node():
    lines = ["JobID|JobName|Account|State|Start|End|ElapsedRaw|AllocTRES|Comment",
             "41|big|lattice|COMPLETED|2026-11-03T09:00:00|2026-11-03T11:00:00|7200|"
             "billing=3,cpu=3,gres/gpu:a100=24,gres/gpu=24,mem=768M,node=3|wl-0123456789abcdef"]
    (record,) = iter_sacct_usage(lines, cluster="hpc")
    assert record.gpus == 24 and record.gpu_seconds == 24 * 7200
    assert record.workload_id == "wl-0123456789abcdef"


def test_running_job_has_no_end_and_steps_and_cpu_jobs_are_skipped():
    lines = ["JobID|Account|State|Start|End|ElapsedRaw|AllocTRES",
             "50|lattice|RUNNING|2026-11-03T09:00:00|Unknown|600|gres/gpu=8,node=1",
             "50.batch|lattice|RUNNING|2026-11-03T09:00:00|Unknown|600|gres/gpu=8,node=1",
             "51|lattice|COMPLETED|2026-11-03T09:00:00|2026-11-03T09:10:00|600|cpu=4,node=1"]
    (record,) = iter_sacct_usage(lines, cluster="hpc")
    assert record.job_id == "50" and record.end is None and record.gpu_seconds == 8 * 600


def test_gpu_tres_parsing():
    assert parse_gpu_tres("billing=1,cpu=1,gres/gpu:a100=2,gres/gpu=2,mem=256M,node=1") == (2, "a100")
    assert parse_gpu_tres("gres/gpu:h100=4") == (4, "h100")
    assert parse_gpu_tres("cpu=1") == (0, "")


def test_sacct_usage_through_the_slurm_backend_agrees_by_hand():
    with SAMPLE.open() as f:
        records = list(sacct_usage(f, cluster="ci"))
    assert {r.job_id: (r.gpus, r.gpu_seconds) for r in records} == EXPECTED
    with SAMPLE.open() as f:
        ours = list(iter_sacct_usage(f, cluster="ci"))
    assert [(r.job_id, r.start, r.end, r.account, r.workload_id) for r in records] == [
        (r.job_id, r.start, r.end, r.account, r.workload_id) for r in ours]


@pytest.mark.django_db
def test_real_sacct_lines_collected_into_the_ledger(monkeypatch, onprem, gpu_class):
    """The real sample through the Slurm backend's usage() and usage_collect, into the ledger."""
    from accounting.sacct import _LinesTransport
    from accounting.services import usage as usage_service
    from broker.backends.slurm.backend import SlurmBackend

    backend = SlurmBackend(onprem.name, _LinesTransport(SAMPLE.read_text().splitlines()))
    monkeypatch.setattr(usage_service, "backend_for", lambda cluster: backend)
    report = usage_service.usage_collect(cluster_id=onprem.id)
    assert report.ingest.created == len(EXPECTED)
    assert sum(report.ingest.unmatched_accounts.values()) == len(EXPECTED)  # root/research: no project
    assert sum(e.gpu_seconds for e in onprem.usage_entries.all()) == sum(s for _, s in EXPECTED.values())
