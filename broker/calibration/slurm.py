"""The real side of a Slurm calibration: the job list submitted straight to slurmctld
(``sbatch`` of ``sleep`` jobs in a partition of their own, the broker not in the path) at its
instants on the wall clock, ``squeue`` sampled for the reasons, ``sacct`` read for the
times and the scheduler's own backfill flag (``Flags=SchedBackfill``).

Commands go through the Slurm backend's ``CommandTransport``: argument lists with timeouts,
through ``ssh`` where the cluster is configured so."""

from __future__ import annotations

import time
import uuid

from broker.backends.base import Unavailable
from broker.backends.slurm.commands import CommandTransport
from broker.backends.slurm.limits import slurm_duration_s
from broker.backends.slurm.states import map_reason
from broker.calibration.jobs import CalibrationJob, JobList, WarmupJob
from broker.calibration.pace import Clock, Pace, Sleep, keep_pace
from broker.calibration.played import Observed, Played


def config_values(transport: CommandTransport) -> dict[str, str]:
    """``scontrol show config`` as key -> value (the harness keeps its own reading, so an
    older commit's simulator can be played with it: scripts/calibration_resimulate_at.py)."""
    out = transport.query(["scontrol", "show", "config"])
    return {k.strip(): v.strip() for k, sep, v in (line.partition("=") for line in out.splitlines()) if sep}


class SlurmPlayer:
    def __init__(
        self,
        transport: CommandTransport,
        *,
        partition: str,
        account: str = "",
        gres_type: str = "",
        sample_s: float = 1.0,
        clock: Clock = time.time,
        sleep: Sleep = time.sleep,
    ) -> None:
        self.transport, self.partition, self.account, self.gres_type = transport, partition, account, gres_type
        self.sample_s, self.clock, self.sleep = sample_s, clock, sleep
        self.tag = f"cal{uuid.uuid4().hex[:6]}"

    def version(self) -> str:
        out = self.transport.query(["sinfo", "--version"]).strip()
        return out.replace("slurm-wlm", "slurm")  # Debian's package says "slurm-wlm 22.05.8"

    def play(self, jobs: JobList, *, deadline_s: float) -> Played:
        played = Played(side=self.version())
        ids: dict[str, str] = {}

        def act(what: str, job: CalibrationJob, at: float) -> None:
            if what == "submit":
                ids[job.name] = self._submit(job)
            else:
                self.transport.run(["scancel", ids[job.name]])

        t0 = self.clock()
        try:
            t0 = keep_pace(
                jobs,
                Pace(self.clock, self.sleep, self.sample_s),
                act=act,
                sample=lambda start: self._sample(start, ids, played),
                deadline_s=deadline_s,
            )
        finally:
            left = list(ids.values())
            if left:  # never leave a calibration job behind, whatever happened
                self.transport.run(["scancel", *left])
        self._times(t0, ids, played)
        return played

    def warm_up(self, jobs: tuple[WarmupJob, ...], *, wait_s: float = 300.0) -> None:
        """Run the list's warm-up jobs to their end, then wait one ``PriorityCalcPeriod``:
        Slurm charges a job's use as it ends and folds use into the fair-share factors on
        that period, so the inventory read next carries the factors the run will see."""
        if not jobs:
            return
        ids = [self._submit_warmup(job) for job in jobs]
        deadline = self.clock() + wait_s
        while self.transport.query(
            ["squeue", "-h", "-j", ",".join(ids), "-o", "%i"], empty_ok=("Invalid job id",)
        ).strip():
            if self.clock() >= deadline:
                self.transport.run(["scancel", *ids])
                raise Unavailable(f"warm-up jobs {', '.join(ids)} did not end within {wait_s:g} s")
            self.sleep(self.sample_s)
        self.sleep(self._calc_period_s() + 5.0)

    def _submit_warmup(self, job: WarmupJob) -> str:
        cmd = ["sbatch", "--parsable", "-p", self.partition, "-J", f"{self.tag}-warmup", "-N", str(job.nodes)]
        cmd += [f"--ntasks-per-node={job.cpus_per_node}", "--time=5", f"--account={job.account}", "-o", "/dev/null"]
        cmd += ["--wrap", f"sleep {job.run_s:g}"]
        return self.transport.query(cmd).strip().split(";", 1)[0]

    def _calc_period_s(self) -> float:
        period = config_values(self.transport).get("PriorityCalcPeriod", "")
        return slurm_duration_s(period) or 300.0  # unset: Slurm's default, 5 minutes

    def _name(self, job: CalibrationJob) -> str:
        return f"{self.tag}-{job.name}"

    def _submit(self, job: CalibrationJob) -> str:
        gtype = job.mig_profile or self.gres_type  # a MIG slice is a typed gres named by its profile
        gres = f"gpu:{gtype}:{job.gpus_per_worker}" if gtype else f"gpu:{job.gpus_per_worker}"
        cmd = ["sbatch", "--parsable", "-p", self.partition, "-J", self._name(job), "-N", str(job.workers)]
        cmd += ["--ntasks-per-node=1", f"--gres={gres}", f"--time={job.time_limit_min}", "-o", "/dev/null"]
        account = job.account or self.account
        cmd += [f"--account={account}"] if account else []
        cmd += [f"--qos={job.qos}"] if job.qos else []
        cmd += ["--wrap", f"sleep {job.run_s:g}"]
        out = self.transport.query(cmd)
        return out.strip().split(";", 1)[0]

    def _sample(self, t0: float, ids: dict[str, str], played: Played) -> bool:
        """One look at the queue; True while any of the run's jobs is still in it."""
        if not ids:
            return True
        at = round(self.clock() - t0, 1)
        try:
            out = self.transport.query(
                ["squeue", "-h", "-j", ",".join(ids.values()), "-o", "%i|%T|%r"], empty_ok=("Invalid job id",)
            )
        except Unavailable as exc:
            played.notes.append(f"squeue at {at:.1f}s: {exc}")
            return True
        by_id = {v: k for k, v in ids.items()}
        waiting, alive = {}, False
        for line in out.splitlines():
            job_id, state, reason = (line.split("|") + ["", ""])[:3]
            if job_id not in by_id:
                continue
            alive = alive or state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
            if state == "PENDING":
                waiting[by_id[job_id]] = map_reason(reason).value
        played.reasons[at] = waiting
        return alive

    def _times(self, t0: float, ids: dict[str, str], played: Played) -> None:
        out = self.transport.query(
            [
                "sacct",
                "-X",
                "-n",
                "-P",
                "-j",
                ",".join(ids.values()),
                "--format=JobID,Submit,Start,End,State,Flags,NodeList",
            ]
        )
        rows = {}
        for line in out.splitlines():
            job_id, submit, start, end, state, flags, nodes = (line.split("|") + [""] * 7)[:7]
            rows[job_id] = (submit, start, end, state, flags, nodes)
        for name, job_id in ids.items():
            submit, start, end, state, flags, nodes = rows.get(job_id, ("", "", "", "MISSING", "", ""))
            played.jobs[name] = Observed(
                name=name,
                submitted_s=_since(submit, t0) or 0.0,
                started_s=_since(start, t0),
                ended_s=_since(end, t0),
                state=state.split()[0].lower() if state else "missing",
                backfilled="SchedBackfill" in flags,
                nodes="" if nodes in ("None assigned", "(null)") else nodes,
            )


def _since(epoch: str, t0: float) -> float | None:
    """sacct's time (epoch seconds: the transport sets SLURM_TIME_FORMAT=%s) as seconds
    from the start of the run; None for Unknown/None (never started)."""
    try:
        return float(int(epoch)) - t0
    except ValueError:
        return None
