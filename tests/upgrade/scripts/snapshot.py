# Run by `manage.py shell` of EITHER release: what the upgrade must keep, read with that
# release's own ORM and chargeback (accounting.chargeback.build_report, in every release since
# 0.1.0). Printed as one JSON line after UPGRADE_SNAPSHOT.
import dataclasses
import json

from accounting.chargeback import build_report
from accounting.models import BillImport, BillLine, UsageEntry
from broker.models import AuditRecord, Cluster, DispatchAttempt, Escalation, Quota, Reservation, Workload


def plain(x):
    """JSON of a report: dict keys and values that are dates or decimals as their text."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x if isinstance(x, (int, float, bool, type(None))) else str(x)


def rows(qs, *fields):
    return {str(r[0]): [str(x) for x in r[1:]] for r in qs.values_list("id", *fields)}


months = sorted({d.date().replace(day=1) for d in UsageEntry.objects.values_list("start", flat=True)}
                | {d.date().replace(day=1) for d in BillLine.objects.values_list("usage_start", flat=True)})
# per month: a month the upgrade did not touch must read the same before and after
chargeback = {m.isoformat(): dataclasses.asdict(build_report(months=[m], tenant_ids=None)) for m in months}
snapshot = {
    "workloads": rows(Workload.objects, "uid", "state", "cluster_id", "destination_job_id"),
    "reservations": rows(Reservation.objects, "workload_id", "state", "gpus"),
    "attempts": rows(DispatchAttempt.objects, "workload_id", "state", "destination_job_id"),
    "escalations": rows(Escalation.objects, "kind", "state"),
    "usage": rows(UsageEntry.objects, "cluster_id", "job_id", "gpu_seconds"),
    "bills": rows(BillImport.objects, "sha256", "total_cost"),
    "bill_lines": rows(BillLine.objects, "bill_id", "cost"),
    "quotas": rows(Quota.objects, "tenant_id", "gpu_class_id", "limit_gpus"),
    "clusters": rows(Cluster.objects, "name"),
    "audit": rows(AuditRecord.objects, "action"),
    "chargeback": plain(chargeback),
}
print("UPGRADE_SNAPSHOT " + json.dumps(snapshot, sort_keys=True))
