# Run by `manage.py shell` of the PREVIOUS release (0.1.0 and later): a database as a site has it
# at upgrade time. The demo's tenants, users, GPU classes, quotas and clusters; workloads in every
# lifecycle state with the reservations, dispatch attempts and audit records that state implies;
# open and resolved escalations; last month's usage (the ledger) and an imported cloud bill.
# Written with the ORM that release ships, so only fields every release since 0.1.0 has are set.
import datetime as dt
import json

from django.contrib.auth import get_user_model
from django.utils import timezone

from accounting.models import UsageEntry, UsageSource
from accounting.services.bills import bill_import
from broker.lifecycle import AttemptState, EscalationState, ReservationState, WorkloadState
from broker.models import AuditRecord, Cluster, DispatchAttempt, Escalation, GpuClass, Reservation, Workload
from broker.services.demo import demo_seed
from portal.tenancy.models import Project

demo_seed()
project = Project.objects.get(slug="lattice-qcd")
user = get_user_model().objects.get(username="researcher")
admin = get_user_model().objects.get(username="admin")
cluster = Cluster.objects.order_by("name").first()
gpu_class = GpuClass.objects.order_by("slug").first()
now = timezone.now()
last_month = (now.replace(day=1) - dt.timedelta(days=1)).replace(day=3, hour=8, minute=0, second=0, microsecond=0)

LIVE = {"reserved": ReservationState.ACTIVE, "dispatching": ReservationState.ACTIVE,
        "queued": ReservationState.CONFIRMED, "running": ReservationState.CONFIRMED,
        "cancelling": ReservationState.CONFIRMED}
SENT = {"queued", "running", "cancelling", "completed", "failed", "cancelled"}
ENDED = {"completed", "failed", "cancelled", "rejected"}

for state in WorkloadState.values:
    for n in range(2):
        name = f"upgrade-{state}-{n}"
        sent = state in SENT
        w = Workload.objects.create(
            tenant=project.tenant, project=project, submitted_by=user, name=name, gpu_class=gpu_class, total_gpus=2,
            spec={"project": project.slug, "name": name, "command": "python train.py", "gpu_class": gpu_class.slug,
                  "gpus_per_worker": 2, "workers": 1},
            state=state, cluster=cluster if sent or state in LIVE else None,
            destination_job_id=f"up-{state}-{n}" if sent else "",
            dispatched_at=last_month if sent else None, started_at=last_month if state in SENT - {"queued"} else None,
            ended_at=last_month + dt.timedelta(hours=1) if state in ENDED else None,
        )
        if state in LIVE:
            Reservation.objects.create(workload=w, tenant=w.tenant, gpu_class=gpu_class, cluster=cluster, gpus=2,
                                       state=LIVE[state], expires_at=now + dt.timedelta(hours=2))
        elif state in ENDED and state != "rejected":
            Reservation.objects.create(workload=w, tenant=w.tenant, gpu_class=gpu_class, cluster=cluster, gpus=2,
                                       state=ReservationState.RELEASED, expires_at=last_month, ended_at=w.ended_at)
        if state == "dispatching":
            DispatchAttempt.objects.create(workload=w, cluster=cluster, number=1, state=AttemptState.STARTED)
        if sent:
            DispatchAttempt.objects.create(workload=w, cluster=cluster, number=1, state=AttemptState.ACCEPTED,
                                           destination_job_id=w.destination_job_id, finished_at=last_month)
            AuditRecord.objects.create(workload=w, tenant=w.tenant, action="workload.dispatched", cluster=cluster.name,
                                       destination_job_id=w.destination_job_id)
        if state in {"completed", "failed", "cancelled"}:
            UsageEntry.objects.create(
                source=UsageSource.SLURM, cluster=cluster, job_id=w.destination_job_id, workload_uid=w.uid, workload=w,
                account="lattice", user=user, tenant=w.tenant, project=project, gpu_class=gpu_class, gpus=2,
                start=last_month, end=last_month + dt.timedelta(hours=1), gpu_seconds=7200, state=state.upper())

# one unclear allocation an admin has not looked at, one resolved
Escalation.objects.create(kind="orphan_job", key=f"{cluster.name}:orphan-1", cluster=cluster, tenant=project.tenant,
                          destination_job_id="orphan-1", gpus=4, evidence={"seen": "seed"})
Escalation.objects.create(kind="lost_job", key=f"{cluster.name}:lost-1", cluster=cluster, tenant=project.tenant,
                          destination_job_id="lost-1", gpus=2, state=EscalationState.RESOLVED, resolved_by=admin,
                          resolved_at=now, outcome="seeded")
with open("tests/accounting/fixtures/aws_cur.csv", "rb") as bill:
    bill_import(provider="aws", file_name="aws_cur.csv", content=bill, actor=admin)

print("UPGRADE_SEEDED " + json.dumps({"workloads": Workload.objects.count(), "month": last_month.date().isoformat()}))
