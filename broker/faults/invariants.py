"""The invariant counters: queries over the broker's database and the destinations' truth.

Five counts the issue names, each must be zero after a run, plus the checks that make
them trustworthy (a harness that loses every workload would count no duplicates):

==========================  ==========================================================
duplicate_destination_jobs  destination jobs beyond the first that carry one workload id
stranded_reservations       live reservations of ended or unplaced workloads, and active
                            ones past their expiry, after the final reconciliation
quota_overshoot             observations (after any step) of a tenant x GPU class whose
                            live reservations, or whose GPUs in live destination jobs,
                            exceed its quota's ceiling
ended_while_stale           workloads with a destination job that the broker ended while
                            their cluster could not be asked (unreachable or stale) and
                            the destination had not ended the job
unclear_released            unclear allocations released without an admin: escalations
                            resolved by nobody, lost jobs whose reservation went away
                            while their escalation was open, foreign jobs the broker
                            cancelled
==========================  ==========================================================
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Q, Sum

from broker.faults.truth import Truth, TruthJob, by_workload
from broker.models import (
    AuditRecord,
    Escalation,
    EscalationKind,
    EscalationState,
    Quota,
    Reservation,
    ReservationState,
    Workload,
    WorkloadState,
)
from broker.models.quota import LIVE_RESERVATION_STATES
from broker.models.workload import TERMINAL_STATES
from broker import runtime

INVARIANTS: tuple[tuple[str, str], ...] = (
    ("duplicate_destination_jobs", "duplicate destination jobs"),
    ("stranded_reservations", "stranded reservations"),
    ("quota_overshoot", "quota overshoot"),
    ("ended_while_stale", "jobs charged as ended while their cluster was stale"),
    ("unclear_released", "unclear allocations released without an admin"),
)
CHECKS: tuple[tuple[str, str], ...] = (
    ("ended_while_live", "workloads ended while their job still ran at the destination"),
    ("leaked_jobs", "destination jobs left running for ended workloads"),
    ("submitted_unreserved", "submissions sent without a live reservation"),
    ("unreserved_at_destination", "workloads queued/running without a reservation"),
    ("unsettled", "workloads neither ended nor escalated after the drain"),
    ("errors", "unexpected errors in tasks"),
)
END_ACTIONS = tuple(f"workload.{s}" for s in ("completed", "failed", "cancelled", "rejected"))
AT_DESTINATION = (WorkloadState.QUEUED, WorkloadState.RUNNING)


@dataclass
class InvariantWatch:
    """Checks after every step of a run, and once at the end."""

    truth: Truth
    workload_prefix: str = ""  # only workloads whose name starts with this count
    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    foreign_jobs: set[tuple[str, str]] = field(default_factory=set)  # (cluster, job id) injected
    _audit_mark: int = 0
    _unreserved: set[int] = field(default_factory=set)
    _submits: int = 0
    _owners: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        last = AuditRecord.objects.order_by("-id").values_list("id", flat=True).first()
        self._audit_mark = last or 0

    def note(self, key: str, example: str, n: int = 1) -> None:
        self.counts[key] += n
        if len(self.examples[key]) < 10:
            self.examples[key].append(example)

    def _workloads(self):
        qs = Workload.objects.all()
        return qs.filter(name__startswith=self.workload_prefix) if self.workload_prefix else qs

    # -- during the run --------------------------------------------------------------
    def after_step(
        self, *, unreachable: set[str], jobs: list[TruthJob] | None = None, step: str = "", force: bool = False
    ) -> None:
        records = list(
            AuditRecord.objects.filter(id__gt=self._audit_mark)
            .select_related("workload", "workload__cluster")
            .order_by("id")
        )
        if not records and not force and not self._submits:
            return  # nothing changed in the broker, nothing sent anywhere
        if records:
            self._audit_mark = records[-1].id
        self._submits = 0
        jobs = self.truth.all_jobs() if jobs is None else jobs
        self._quota(jobs, step)
        self._ended([r for r in records if r.action in END_ACTIONS], jobs, unreachable, step)
        self._unreserved_check(step)

    def on_submit(self, workload_uid: str, cluster: str) -> None:
        """Called as a submission leaves for a destination (before it arrives)."""
        self._submits += 1
        if not Reservation.objects.filter(workload__uid=workload_uid, state__in=LIVE_RESERVATION_STATES).exists():
            self.note("submitted_unreserved", f"{workload_uid} sent to {cluster} without a live reservation")

    def _ceilings(self) -> dict[tuple[int, int], int]:
        return {(q.tenant_id, q.gpu_class_id): q.ceiling for q in Quota.objects.all()}

    def _owner(self, uids: set[str]) -> dict[str, tuple[int, int]]:
        missing = uids - set(self._owners)
        if missing:
            for uid, tenant, cls in Workload.objects.filter(uid__in=missing).values_list(
                "uid", "tenant_id", "gpu_class_id"
            ):
                self._owners[uid] = (tenant, cls)
        return self._owners

    def _quota(self, jobs: list[TruthJob], step: str) -> None:
        ceilings = self._ceilings()
        rows = (
            Reservation.objects.filter(state__in=LIVE_RESERVATION_STATES)
            .values("tenant_id", "gpu_class_id")
            .annotate(n=Sum("gpus"))
        )
        for row in rows:
            ceiling = ceilings.get((row["tenant_id"], row["gpu_class_id"]), 0)
            if row["n"] > ceiling:
                self.note(
                    "quota_overshoot",
                    f"{step}: tenant {row['tenant_id']} class {row['gpu_class_id']}: "
                    f"{row['n']} GPUs reserved > ceiling {ceiling}",
                )
        live = [j for j in jobs if j.active and j.workload_id]
        owners = self._owner({j.workload_id for j in live if j.workload_id is not None})  # live: all have one
        used: dict[tuple[int, int], int] = defaultdict(int)
        for job in live:
            if job.workload_id in owners:
                used[owners[job.workload_id]] += job.gpus
        for key, n in used.items():
            if n > ceilings.get(key, 0):
                self.note(
                    "quota_overshoot",
                    f"{step}: tenant {key[0]} class {key[1]}: {n} GPUs in live "
                    f"destination jobs > ceiling {ceilings.get(key, 0)}",
                )

    def _ended(self, records: list[AuditRecord], jobs: list[TruthJob], unreachable: set[str], step: str) -> None:
        if not records:
            return
        mine = by_workload(jobs)
        for rec in records:
            workload = rec.workload
            if workload is None:
                continue
            at_dest = mine.get(workload.uid, [])
            if workload.destination_job_id or at_dest:
                cluster = workload.cluster.name if workload.cluster else ""
                still_live = [j for j in at_dest if j.active]
                if cluster in unreachable or (workload.cluster and workload.cluster.health == "stale" and still_live):
                    self.note(
                        "ended_while_stale",
                        f"{step}: {workload.uid} {rec.action} while {cluster} was unreachable/stale",
                    )
                if still_live:
                    self.note(
                        "ended_while_live",
                        f"{step}: {workload.uid} {rec.action} but "
                        f"{[j.job_id for j in still_live]} still live at {cluster}",
                    )

    def _unreserved_check(self, step: str) -> None:
        reserved = Reservation.objects.filter(state__in=LIVE_RESERVATION_STATES).values("workload_id")
        ids = set(
            self._workloads().filter(state__in=AT_DESTINATION).exclude(id__in=reserved).values_list("id", flat=True)
        )
        for wid in ids - self._unreserved:
            self.note("unreserved_at_destination", f"{step}: workload {wid} at a destination without a reservation")
        self._unreserved |= ids

    # -- after the drain ---------------------------------------------------------------
    def final(self, *, grace_s: float = 60.0) -> dict[str, int]:
        now = runtime.now()
        jobs = self.truth.all_jobs()
        workloads = {w.uid: w for w in self._workloads().select_related("cluster")}
        mine = by_workload(jobs)
        for uid, found in mine.items():
            found = [j for j in found if not j.lost]  # a job its destination lost is gone, not a twin
            if uid in workloads and len(found) > 1:
                self.note(
                    "duplicate_destination_jobs", f"{uid}: {[(j.cluster, j.job_id) for j in found]}", len(found) - 1
                )
        live = Reservation.objects.filter(state__in=LIVE_RESERVATION_STATES, workload__uid__in=list(workloads))
        stranded = live.filter(
            Q(workload__state__in=TERMINAL_STATES)
            | Q(workload__state__in=(WorkloadState.SUBMITTED, WorkloadState.WAITING))
            | Q(state=ReservationState.ACTIVE, expires_at__lt=now - timedelta(seconds=grace_s))
        )
        for res in stranded.select_related("workload"):
            self.note(
                "stranded_reservations",
                f"reservation {res.id} ({res.state}) of {res.workload.uid} in state {res.workload.state}",
            )
        self._unclear(workloads, jobs)
        for uid, found in mine.items():
            w = workloads.get(uid)
            if w is not None and w.state in TERMINAL_STATES:
                for job in found:
                    if job.active:
                        self.note("leaked_jobs", f"{uid} is {w.state} but {job.cluster}/{job.job_id} is live")
        escalated = set(
            Escalation.objects.filter(kind=EscalationKind.LOST_JOB)
            .exclude(state=EscalationState.RESOLVED)
            .values_list("workload_id", flat=True)
        )
        for w in workloads.values():
            if w.state not in TERMINAL_STATES and w.id not in escalated:
                self.note("unsettled", f"{w.uid} still {w.state} ({w.reason}: {w.raw_reason[:120]})")
        self._unreserved_check("final")
        return self.summary()

    def _unclear(self, workloads: dict[str, Workload], jobs: list[TruthJob]) -> None:
        for esc in Escalation.objects.filter(state=EscalationState.RESOLVED, resolved_by__isnull=True):
            self.note("unclear_released", f"escalation {esc.key} resolved without an admin")
        lost = (
            Escalation.objects.filter(kind=EscalationKind.LOST_JOB)
            .exclude(state=EscalationState.RESOLVED)
            .select_related("workload")
        )
        for esc in lost:
            w = esc.workload
            if w is None:
                continue
            if w.state in TERMINAL_STATES or not w.reservations.filter(state__in=LIVE_RESERVATION_STATES).exists():
                self.note(
                    "unclear_released",
                    f"{w.uid}: lost job {esc.destination_job_id} released "
                    f"(workload {w.state}) while its escalation is open",
                )
        by_id = {(j.cluster, j.job_id): j for j in jobs}
        for key in self.foreign_jobs:
            job = by_id.get(key)
            if job is not None and not job.active and not job.lost and self._cancelled_by_broker(key):
                self.note("unclear_released", f"foreign job {key} was cancelled by the broker")

    @staticmethod
    def _cancelled_by_broker(key: tuple[str, str]) -> bool:
        return AuditRecord.objects.filter(
            cluster=key[0], destination_job_id=key[1], action__startswith="workload.cancel"
        ).exists()

    def summary(self) -> dict[str, int]:
        return {key: self.counts.get(key, 0) for key, _ in INVARIANTS + CHECKS}
