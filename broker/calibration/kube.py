"""The real side of a Kueue or Volcano calibration: the job list created straight in the
cluster as the backend builds its jobs (Kueue: suspended Jobs in a LocalQueue; Volcano:
vcjob gangs in a Volcano queue; the broker not in the path) at its instants on the wall
clock; the jobs and their partners (Kueue's Workloads, Volcano's PodGroups) listed every
second for the reasons, the starts, the ends and the preemptions.

Where a job starts: Kueue, its Workload's PodsReady; Volcano, the vcjob's first Running
transition, which Volcano writes once ``minAvailable`` pods run (the whole gang).

On the CI cluster kwok runs the pods: each completes after the ``sleep N`` of its command
(a kwok Stage with that delay).  The batch Job controller kills a Kueue job that passes its
``activeDeadlineSeconds`` (the time limit); a vcjob's pods carry the deadline themselves,
which only a kubelet enforces, so on kwok a Volcano job runs past its limit (the Volcano
job list keeps its limits above its run times).  Local jobs are the same jobs in the local
queue, as a user of the cluster would submit them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from broker.backends.base import DestinationJob, JobState, ProjectIdentity, Unavailable
from broker.backends.kube.common import condition_fields, job_ref, parse_time
from broker.backends.kube.settings import BackendSettings
from broker.calibration.jobs import CalibrationJob, JobList
from broker.calibration.pace import Clock, Pace, Sleep, keep_pace
from broker.calibration.played import Observed, Played


@runtime_checkable
class KubeSide(Protocol):
    """What the player needs of ``KueueBackend`` or ``VolcanoBackend`` (as ``backend_for``
    hands them out, guarded); a job's partner is its Workload or its PodGroup."""

    cluster: str
    kind: str  # "kueue", "volcano"
    settings: BackendSettings

    def submit(self, spec: Any, workload_id: str, identity: ProjectIdentity) -> str: ...
    def cancel(self, job_id: str) -> bool: ...
    def describe(self, job: Mapping[str, Any], partner: Mapping[str, Any] | None) -> DestinationJob: ...
    def calibration_jobs(self, namespace: str, project: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]: ...
    def server_version(self) -> str: ...


StartOf = Callable[[DestinationJob, Mapping[str, Any] | None], datetime | None]


def kueue_start(job: DestinationJob, wl: Mapping[str, Any] | None) -> datetime | None:
    """PodsReady: every pod of the Workload runs (admission alone is not a start)."""
    ready = condition_fields(wl or {}, "PodsReady")
    if ready is not None and ready.value("status") == "True":
        return parse_time(ready.text("lastTransitionTime"))
    return job.started_at if job.state.ended else None


def volcano_start(job: DestinationJob, pod_group: Mapping[str, Any] | None) -> datetime | None:
    """The vcjob's first Running transition (the backend's ``started_at``)."""
    return job.started_at if job.state is JobState.RUNNING or job.state.ended else None


class KubePlayer:
    def __init__(
        self,
        backend: KubeSide,
        *,
        namespace: str,
        queue: str,
        local_queue: str,
        gpu_models: list[str],
        start: StartOf = kueue_start,
        sample_s: float = 1.0,
        clock: Clock = time.time,
        sleep: Sleep = time.sleep,
    ) -> None:
        self.backend, self.namespace, self.queue, self.local_queue = backend, namespace, queue, local_queue
        self.gpu_models = gpu_models  # the flavors' (pool's) models: a job may run on any
        self.start = start
        self.sample_s, self.clock, self.sleep = sample_s, clock, sleep
        self.tag = f"cal{uuid.uuid4().hex[:6]}"

    def play(self, jobs: JobList, *, deadline_s: float) -> Played:
        played = Played(side=f"{self.backend.kind} on {self.backend.server_version()}")
        seen: dict[str, _Seen] = {}

        def act(what: str, job: CalibrationJob, at: float) -> None:
            if what == "submit":
                seen[job.name] = _Seen(self._submit(job), submitted_s=at)
            else:
                self._cancel(seen[job.name], at)

        try:
            keep_pace(
                jobs,
                Pace(self.clock, self.sleep, self.sample_s),
                act=act,
                sample=lambda t0: self._sample(t0, seen, played),
                deadline_s=deadline_s,
            )
        finally:
            for s in seen.values():  # never leave a calibration job behind, whatever happened
                if not s.gone:
                    self.backend.cancel(s.ref)
        for name, s in seen.items():
            played.jobs[name] = s.observed(name)
        return played

    def _submit(self, job: CalibrationJob) -> str:
        queue = self.local_queue if job.local else self.queue
        identity = ProjectIdentity(tenant="calibration", project=self.tag, k8s_namespace=self.namespace, queue=queue)
        return self.backend.submit(job.spec(self.tag, gpu_models=self.gpu_models), f"{self.tag}-{job.name}", identity)

    def _cancel(self, s: _Seen, at: float) -> None:
        self.backend.cancel(s.ref)
        s.gone = True
        if s.word not in ("completed", "failed", "timeout"):
            s.word, s.ended_s = "cancelled", (at if s.started_s is not None else None)

    def _sample(self, t0: float, seen: dict[str, _Seen], played: Played) -> bool:
        """One look at the run's jobs and their partners; True while any job is not yet over."""
        if not seen:
            return True
        at = round(self.clock() - t0, 1)
        try:
            listed = self.backend.calibration_jobs(self.namespace, self.tag)
        except Unavailable as exc:
            played.notes.append(f"list at {at:.1f}s: {exc}")
            return True
        by_ref = {job_ref(job): (job, wl) for job, wl in listed}
        waiting = {}
        for name, s in seen.items():
            if s.gone or s.ref not in by_ref:
                continue
            job, wl = by_ref[s.ref]
            described = self.backend.describe(job, wl)
            s.update(described, wl, t0, self.start)
            if described.state is JobState.PENDING:
                waiting[name] = described.reason.value
                _note(played, f"{described.reason.value}: {described.raw_reason}")
        played.reasons[at] = waiting
        return any(not s.over for s in seen.values())


def _note(played: Played, text: str, most: int = 40) -> None:
    """Each distinct reason text once (the evidence of what the control plane said), at most
    ``most``."""
    if text not in played.notes and len(played.notes) < most:
        played.notes.append(text)


class _Seen:
    """What the samples told of one job so far."""

    def __init__(self, ref: str, *, submitted_s: float) -> None:
        self.ref, self.submitted_s = ref, submitted_s
        self.started_s: float | None = None
        self.ended_s: float | None = None
        self.word = "pending"  # as the calibration words it: completed, timeout, ...
        self.preempted_at: set[str] = set()
        self.gone = False

    @property
    def over(self) -> bool:
        return self.gone or self.word in ("completed", "failed", "timeout")

    def update(self, job: DestinationJob, wl: Mapping[str, Any] | None, t0: float, start: StartOf) -> None:
        if self.started_s is None:
            when = start(job, wl)
            self.started_s = None if when is None else round(when.timestamp() - t0, 1)
        evicted = condition_fields(wl or {}, "Evicted")
        if evicted is not None and evicted.value("status") == "True" and evicted.value("reason") == "Preempted":
            self.preempted_at.add(evicted.text("lastTransitionTime"))
        if job.state.ended:
            self.word = _ended_word(job)
            self.ended_s = _since_dt(job, t0)

    def observed(self, name: str) -> Observed:
        return Observed(
            name=name,
            submitted_s=self.submitted_s,
            started_s=self.started_s,
            ended_s=self.ended_s,
            state=self.word,
            preempted=len(self.preempted_at),
        )


def _ended_word(job: DestinationJob) -> str:
    if job.state is JobState.COMPLETED:
        return "completed"
    return "timeout" if "deadline" in job.raw_reason.lower() else "failed"


def _since_dt(job: DestinationJob, t0: float) -> float | None:
    return None if job.ended_at is None else round(job.ended_at.timestamp() - t0, 1)
