"""The harness's view of a real Slurm cluster (broker/faults/truth.py) reads squeue and sacct
with the Slurm backend's own parsers: on a sample, it and the backend agree on every job's
workload id, whether it is live, and its GPUs."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from broker.backends.slurm import SlurmBackend, SlurmConfig
from broker.faults.truth import SlurmTruth
from tests.broker.backends.slurm.test_backend import ReplayTransport


def _transport() -> ReplayTransport:
    """Real 22.05 output, and records whose name and comment tell different stories."""
    transport = ReplayTransport()
    ended = transport._acct[0]
    transport._acct += [
        replace(ended, job_id="901", name="wl-by-name", comment="not a workload id"),
        replace(ended, job_id="902", name="foreign-job", comment="wl-by-comment"),
        replace(ended, job_id="903", name="wl-odd name", comment=""),
        replace(ended, job_id="904", name="foreign-job", comment="", state="CANCELLED by 0"),
    ]
    return transport


def test_the_harness_and_the_backend_read_the_same_sample_alike():
    transport = _transport()
    truth = SlurmTruth("c", datetime(2026, 1, 1, tzinfo=timezone.utc), transport=transport)
    truth.extra_ids.add("904")  # a foreign job the harness injected
    seen = {j.job_id: (j.workload_id, j.active, j.gpus) for j in truth.all_jobs()}
    ids = sorted({r.job_id for r in transport._acct} | {j.job_id for j in transport._jobs})
    answer = SlurmBackend("c", transport, SlurmConfig()).status(ids)
    backend = {i: (j.workload_id, not j.state.ended, j.gpus) for i, j in answer.items()
               if j.workload_id or i in truth.extra_ids}
    assert seen == backend
    assert seen["902"][0] == "wl-by-comment" and "901" not in seen and "903" not in seen
    assert seen["904"] == (None, False, seen["904"][2])
    assert any(active for _, active, _ in seen.values()) and any(not active for _, active, _ in seen.values())
