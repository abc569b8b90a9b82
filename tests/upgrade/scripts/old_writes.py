# Run by `manage.py shell` of the PREVIOUS release once the new release has migrated: the rows
# its code writes while it still runs (expand-then-contract: each must still be accepted). A new
# cluster as registration writes it, a workload through the submission service, a dispatch
# attempt, an audit record, an escalation, a usage entry. Printed after UPGRADE_OLD_WRITES.
import datetime as dt
import json
import os

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accounting.models import UsageEntry, UsageSource
from broker.lifecycle import AttemptState
from broker.models import AuditRecord, Cluster, DispatchAttempt, Escalation, GpuClass
from broker.services.workloads import workload_submit
from portal.tenancy.models import Project

failed = {}


def attempt(name, write):
    try:
        with transaction.atomic():
            write()
    except Exception as exc:  # what failed is the finding: each write is tried on its own
        failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"


user = get_user_model().objects.get(username="researcher")
project = Project.objects.get(slug="lattice-qcd")
template = Cluster.objects.order_by("name").first()
now = timezone.now()
suffix = os.environ.get("UPGRADE_WRITE_SUFFIX", "1")  # each run's rows are its own


def cluster():
    Cluster.objects.create(name=f"registered-during-upgrade-{suffix}", kind=template.kind, region=template.region,
                           location=template.location, price_per_gpu_hour=template.price_per_gpu_hour)


def workload():
    w = workload_submit(user=user, project_id=project.id, spec_data={
        "project": project.slug, "name": f"submitted-during-upgrade-{suffix}", "command": "python train.py",
        "gpu_class": GpuClass.objects.order_by("slug").first().slug,
        "gpus_per_worker": 1, "workers": 1})
    DispatchAttempt.objects.create(workload=w, cluster=template, number=1, state=AttemptState.STARTED)
    AuditRecord.objects.create(workload=w, tenant=w.tenant, action="upgrade.probe", cluster=template.name)


def escalation():
    Escalation.objects.create(kind="unclear", key=f"{template.name}:during-upgrade-{suffix}", cluster=template, gpus=1)


def usage():
    UsageEntry.objects.create(source=UsageSource.SLURM, cluster=template, job_id=f"during-upgrade-{suffix}", gpus=1,
                              start=now - dt.timedelta(hours=1), end=now, gpu_seconds=3600, state="COMPLETED")


for name, write in (("cluster", cluster), ("workload", workload), ("escalation", escalation), ("usage", usage)):
    attempt(name, write)
print("UPGRADE_OLD_WRITES " + json.dumps(failed, sort_keys=True))
