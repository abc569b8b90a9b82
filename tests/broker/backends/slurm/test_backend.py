"""SlurmBackend over a stand-in transport that replays real 22.05 output."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from broker.backends.base import Backend, JobState, ProjectIdentity, Reason, Unavailable
from broker.backends.slurm import SlurmBackend, SlurmConfig, Transport, parsers
from broker.backends.slurm.transport import Association
from broker.spec import WorkloadSpec

from .support import read_fixture


class ReplayTransport:
    name = "replay"

    def __init__(self, nodes_text="scontrol-show-node-d.txt", jobs_text="squeue-O-us.txt",
                 acct_text="sacct-us.txt"):
        self._nodes = parsers.parse_scontrol_nodes(read_fixture(nodes_text)) if nodes_text else []
        self._jobs = parsers.parse_squeue(read_fixture(jobs_text)) if jobs_text else []
        self._acct = list(parsers.iter_sacct(read_fixture(acct_text).splitlines())) if acct_text else []
        self.submitted = []
        self.cancelled = []
        self.down = False
        self.assocs = [Association("research", ""), Association("research", "root")]
        self.levels = {}

    def _check(self):
        if self.down:
            raise Unavailable("slurm_load_jobs error: Unable to contact slurm controller (connect failure)")

    def submit(self, request):
        self._check()
        self.submitted.append(request)
        return "100"

    def jobs(self, *, job_ids=None, names=None, states=None):
        self._check()
        out = self._jobs
        if job_ids is not None:
            out = [j for j in out if j.job_id in set(job_ids)]
        if names:
            out = [j for j in out if j.name in set(names)]
        if states:
            out = [j for j in out if j.state in set(states)]
        return list(out)

    def nodes(self):
        self._check()
        return list(self._nodes)

    def topology(self):
        return dict(self.levels)

    def accounting(self, *, since=None, job_ids=None, names=None, every_run=False):
        out = self._acct
        if job_ids is not None:
            out = [r for r in out if r.job_id in set(job_ids)]
        if names:
            out = [r for r in out if r.name in set(names)]
        return iter(out)

    def cancel(self, job_id):
        self._check()
        self.cancelled.append(job_id)
        self._jobs = [replace(j, state="CANCELLED") if j.job_id == job_id else j for j in self._jobs]

    def associations(self, account):
        return [a for a in self.assocs if a.account == account]

    def add_account(self, account, users=(), **kw):
        self.assocs.append(Association(account, ""))
        self.assocs.extend(Association(account, u) for u in users)


def backend(**kw) -> tuple[SlurmBackend, ReplayTransport]:
    t = ReplayTransport(**{k: v for k, v in kw.items() if k.endswith("_text")})
    cfg = kw.get("config") or SlurmConfig(throughput_window_s=0)
    return SlurmBackend("ci", t, cfg), t


def test_protocols():
    b, t = backend()
    assert isinstance(b, Backend) and isinstance(t, Transport)
    assert b.kind == "slurm" and b.cluster == "ci"


def test_inventory_pools_per_partition_and_type():
    b, _ = backend()
    snap = b.inventory()
    assert snap.cluster == "ci" and snap.taken_at.tzinfo is not None
    assert [p.name for p in snap.pools] == ["debug/a100", "gpu/a100"]
    pool = snap.pools[1]
    assert (pool.gpu_model, pool.gpu_memory_gb, pool.partitioning, pool.owner) == ("a100", 80, "whole", "slurm")
    n1, n2 = pool.nodes
    assert (n1.gpus_total, n1.gpus_allocated, n1.healthy, n1.draining) == (8, 4, True, False)
    assert (n2.gpus_allocated, n2.draining) == (4, True)          # MIXED+DRAIN
    assert pool.gpus_total == 16 and pool.gpus_allocated == 8
    assert pool.gpus_free == 4                                     # the draining node offers none
    # pending GPU jobs in the replayed queue: 14 (3), 15 (5), 16 (16), 17 (1)
    assert (snap.queue.pending_jobs, snap.queue.pending_gpus) == (4, 25)
    # per account too: under fair share, whose jobs go first depends on it
    assert snap.queue.pending_gpus_by_scope == (("general", 17), ("research", 8))


def test_inventory_without_details_uses_alloc_tres():
    b, _ = backend(nodes_text="scontrol-show-node.txt")
    pool = b.inventory().pools[0]
    assert [n.gpus_allocated for n in pool.nodes] == [4, 0]


def test_inventory_mig_and_socket_types():
    b, t = backend()
    t._nodes = parsers.parse_scontrol_nodes(
        "NodeName=g1 Gres=gpu:a100:4(S:0-1),gpu:a100_1g.10gb:7(S:1) GresDrain=gpu:a100:1 "
        "GresUsed=gpu:a100:2(IDX:0-1),gpu:a100_1g.10gb:3(IDX:4-6) State=IDLE Partitions=mig\n"
        "NodeName=g2 Gres=gpu:h100:8 State=DOWN* Partitions=mig AllocTRES=\n")
    pools = {p.name: p for p in b.inventory().pools}
    assert set(pools) == {"mig/a100", "mig/a100_1g.10gb", "mig/h100"}
    whole, mig, h100 = pools["mig/a100"], pools["mig/a100_1g.10gb"], pools["mig/h100"]
    assert (whole.nodes[0].gpus_total, whole.nodes[0].gpus_allocatable, whole.nodes[0].gpus_allocated) == (4, 3, 2)
    assert (mig.gpu_model, mig.partitioning, mig.gpu_memory_gb, mig.nodes[0].gpus_allocated) == ("a100", "1g.10gb", 10, 3)
    assert h100.nodes[0].healthy is False and h100.gpus_free == 0


def test_each_node_out_of_service_carries_slurms_state_and_reason():
    b, _ = backend()  # n2: MIXED+DRAIN, Reason=fixture drain: gpu=0 check [root@...]
    n1, n2 = b.inventory().pools[1].nodes
    assert n1.health_reason == ""
    assert n2.health_reason == "MIXED+DRAIN: fixture drain: gpu=0 check [root@1795994159]"
    b, t = backend()
    t._nodes = parsers.parse_scontrol_nodes(
        "NodeName=g1 Gres=gpu:a100:4 GresDrain=gpu:a100:1 State=IDLE Partitions=p\n"
        "NodeName=g2 Gres=gpu:a100:8 State=DOWN+NOT_RESPONDING Partitions=p Reason=Not responding\n")
    g1, g2 = b.inventory().pools[0].nodes
    assert g1.health_reason == "1 GPU drained (GresDrain)" and g1.gpus_free == 3
    assert g2.health_reason == "DOWN+NOT_RESPONDING: Not responding" and g2.gpus_free == 0


def test_inventory_partition_filter_and_unavailable():
    b, t = backend(config=SlurmConfig(partitions=("gpu",), throughput_window_s=0))
    assert [p.name for p in b.inventory().pools] == ["gpu/a100"]
    t.down = True
    with pytest.raises(Unavailable):
        b.inventory()
    with pytest.raises(Unavailable):
        b.status(["13"])


def test_throughput_from_accounting():
    b, _ = backend(config=SlurmConfig(throughput_window_s=3600))
    now = datetime.fromtimestamp(1795994200, timezone.utc)
    # GPU-seconds of the replayed jobs inside [now-1h, now]: 3+2+4+30+4+16+16 = 75
    assert b._throughput(now) == round(75 / 3600, 4)


def test_status_maps_states_reasons_and_falls_back_to_accounting():
    b, _ = backend()
    st = b.status(["13", "14", "15", "16", "17", "1", "424242"])
    assert st["13"].state is JobState.RUNNING and st["13"].nodes == ("n1", "n2") and st["13"].gpus == 8
    assert st["13"].workload_id == "wl-fix-run" and st["13"].reason is Reason.NONE
    assert (st["14"].reason, st["14"].raw_reason) == (Reason.POLICY, "QOSMaxGRESPerJob")
    assert (st["15"].reason, st["15"].raw_reason) == (Reason.POLICY, "AssocGrpGRES")
    assert (st["16"].reason, st["16"].raw_reason) == (Reason.CAPACITY, "Resources")
    assert st["17"].reason is Reason.HELD and st["17"].workload_id is None
    assert st["1"].state is JobState.COMPLETED and st["1"].ended_at is not None   # from sacct
    assert "424242" not in st


def test_find_active_then_accounted():
    b, t = backend()
    job = b.find("wl-fix-run")
    assert job.job_id == "13" and job.state is JobState.RUNNING
    # gone from slurmctld: found in accounting by its comment
    t._jobs = []
    job = b.find("wl-m")
    assert job.job_id == "9" and job.state is JobState.COMPLETED and job.gpus == 6
    assert b.find("wl-never") is None


def test_find_prefers_live_then_newest():
    b, t = backend()
    t._jobs = [replace(j, name="wl-dup", comment="wl-dup") for j in t._jobs if j.job_id in ("10", "11", "14")]
    assert b.find("wl-dup").job_id == "14"          # the pending one
    t._jobs = [j for j in t._jobs if j.job_id != "14"]
    assert b.find("wl-dup").job_id == "11"          # newest of the ended ones


def test_active_jobs_includes_foreign_gpu_jobs():
    b, _ = backend()
    active = {j.job_id: j for j in b.active_jobs()}
    assert set(active) == {"13", "14", "15", "16", "17"}
    assert active["17"].workload_id is None


def test_submit_uses_mapping_and_known_types():
    b, t = backend()
    b.inventory()  # learns the cluster's GPU types
    spec = WorkloadSpec(project="p", name="n", command="true", gpu_models=("H100", "A100"), gpus_per_worker=2)
    assert b.submit(spec, "wl-s", ProjectIdentity("t", "p", slurm_account="general")) == "100"
    assert t.submitted[0].gres == "gpu:a100:2" and t.submitted[0].account == "general"


def test_cancel_confirms_by_state():
    b, t = backend(config=SlurmConfig(cancel_confirm_s=2, throughput_window_s=0))
    assert b.cancel("14") is True and t.cancelled == ["14"]
    assert b.cancel("424242") is False


def test_usage_gpu_seconds():
    b, _ = backend()
    recs = {u.job_id: u for u in b.usage(datetime.now(timezone.utc) - timedelta(days=1))}
    # never started (2, 3) and GPU-less / failed at submit (4, 5, 7) are left out
    assert set(recs) == {"1", "6", "8", "9", "10", "11", "12"}
    m = recs["9"]
    assert (m.source, m.cluster, m.account, m.gpu_model, m.gpus, m.gpu_seconds) == (
        "slurm", "ci", "general", "a100", 6, 30)
    assert m.workload_id == "wl-m" and m.end is not None and m.state == "COMPLETED"
    assert recs["10"].state == "CANCELLED"


def test_usage_running_job_has_no_end():
    b, _ = backend(acct_text="sacct-us-live.txt")
    (rec,) = list(b.usage(datetime.now(timezone.utc)))
    assert rec.end is None and rec.gpus == 4 and rec.gpu_seconds == 16 and rec.workload_id == "wl-live-run"


def test_a_requeued_jobs_runs_are_one_record_whose_gpu_seconds_are_their_sum():
    """sacct --duplicates from 26.05.5 (the compatibility suite's PreemptMode=REQUEUE case):
    job 933 preempted after 4 s, the preempting job 934 listed between its two runs, then
    933 again for 15 s, on 16 GPUs."""
    b, _ = backend(acct_text="26.05/sacct-us-requeued.txt")
    recs = {u.job_id: u for u in b.usage(datetime.now(timezone.utc) - timedelta(days=1))}
    assert set(recs) == {"933", "934"}
    job = recs["933"]
    assert (job.gpus, job.gpu_seconds, job.state) == (16, 16 * (4 + 15), "COMPLETED")
    assert job.start < job.end and (job.end - job.start).total_seconds() > 4 + 15  # first start to last end


def test_a_requeued_job_waiting_for_its_next_run_stays_open():
    """While it waits, sacct --duplicates lists the preempted run and a PENDING one (seen on
    26.05.5: ``935|PREEMPTED|...`` then ``935|PENDING|Unknown|Unknown|0``)."""
    b, transport = backend(acct_text="26.05/sacct-us-requeued.txt")
    preempted, urgent = transport._acct[:2]
    waiting = replace(preempted, state="PENDING", started_at=None, ended_at=None, elapsed_s=0)
    transport._acct = [preempted, urgent, waiting]
    recs = {u.job_id: u for u in b.usage(datetime.now(timezone.utc) - timedelta(days=1))}
    job = recs["933"]
    assert job.end is None and job.state == "PENDING" and job.gpu_seconds == 16 * 4  # open: more runs to come


def test_ensure_account():
    b, _ = backend()
    assert b.ensure_account("research", ["root"]).ok
    st = b.ensure_account("research", ["root", "alice"])
    assert st.exists and st.missing_users == ("alice",) and not st.ok
    st = b.ensure_account("newproj", ["alice"])
    assert not st.exists and st.detail == "no such account"
    st = b.ensure_account("newproj", ["alice"], create=True)
    assert st.created and st.ok
