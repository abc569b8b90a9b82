"""The operator's kit (ops/): the alert rules fire on what a real scrape of /metrics says,
and every metric the rules and the dashboard read is one the broker exports.

The scrape is the product's own (the test client's GET /metrics over a database set up for
each case); its series, held for 30 minutes, are the input of `promtool test rules`
(marker ``promtool``: Debian's prometheus package; CI installs it, .ci/setup.d/promtool.sh)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from broker.models import Cluster, Escalation, EscalationKind, EscalationState, ReconcileRun
from portal.metrics.models import TaskFailureCount
from tests.factories import ClusterFactory, WorkloadFactory

OPS = Path(__file__).resolve().parents[2] / "ops"
RULES = OPS / "prometheus" / "gpubroker-rules.yml"
DASHBOARD = OPS / "grafana" / "gpubroker-dashboard.json"
NAME = re.compile(r"\bgpubroker_[a-z_]+\b")
DISPATCH = "broker.tasks.dispatch_workload"


def scrape(client, admin) -> str:
    client.force_login(admin)
    response = client.get("/metrics")
    assert response.status_code == 200
    return response.content.decode()


def exported_names(text: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names |= {sample.name for sample in family.samples}
    return names


def used_names() -> set[str]:
    rules = "\n".join(r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"])
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = "\n".join(t["expr"] for p in panels for t in p["targets"])
    return set(NAME.findall(rules)) | set(NAME.findall(exprs))


@pytest.fixture
def broken_fleet(db, trio):
    """A cluster silent for 20 minutes, a reconciliation last finished an hour ago, an
    escalation open for five hours, a tenant past 80% of its cloud budget, and a task that
    has failed five times."""
    now = timezone.now()
    cloud = ClusterFactory(name="cloud", location="cloud", price_per_gpu_hour=Decimal("10"))
    Cluster.objects.filter(pk=cloud.pk).update(last_inventory_at=now - timedelta(minutes=20))
    ReconcileRun.objects.create(started_at=now - timedelta(hours=1, seconds=5), finished_at=now - timedelta(hours=1))
    # its run time as the cluster reports it: the spend is 80 however late the scrape comes
    # (by the clock alone, half a second later it was 80.01 and the alert said "88.9%", CI 2026-12-07)
    workload = WorkloadFactory(project=trio.project, tenant=trio.tenant, submitted_by=trio.member, state="running",
                               cluster=cloud, total_gpus=4, started_at=now - timedelta(hours=2), run_seconds=7200)
    escalation = Escalation.objects.create(kind=EscalationKind.LOST_JOB, key="lost", cluster=cloud, workload=workload,
                                           tenant=trio.tenant, state=EscalationState.OPEN)
    Escalation.objects.filter(pk=escalation.pk).update(created_at=now - timedelta(hours=5))
    trio.tenant.cloud_budget_month = Decimal("90")  # 2 h x 4 GPUs x 10 = 80 spent: 89%
    trio.tenant.save()
    TaskFailureCount.objects.create(task=DISPATCH, failures=5)
    return trio


def test_every_metric_the_rules_and_the_dashboard_read_is_exported(client, broken_fleet):
    exported = exported_names(scrape(client, broken_fleet.owner))
    assert used_names() - exported == set(), sorted(exported)
    assert {"gpubroker_escalation_oldest_open_seconds", "gpubroker_tenant_cloud_budget_month",
            "gpubroker_celery_queue_depth", "gpubroker_celery_task_failures_total"} <= used_names()


def _series(text: str) -> list[dict[str, str]]:
    """The scrape's samples as promtool input series, each held at its value for 30 minutes;
    ages to the nearest 10 s, so that the alerts' texts do not depend on how long the scrape
    took after the fixture set the clock's marks."""
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            value = round(s.value, -1) if s.name.endswith("_seconds") else s.value
            out.append({"series": f"{s.name}{{{labels}}}", "values": f"{value:g}x30"})
    return out


def _failing_and_backed_up(series: list[dict[str, str]]) -> list[dict[str, str]]:
    """The scrape's series, with the failed task failing once more each minute, and a Celery
    queue 250 tasks deep (written here: the test has no Redis broker, so the scrape has no
    depth; the depth reader has its own tests in tests/portal/metrics)."""
    failures = f'gpubroker_celery_task_failures_total{{task="{DISPATCH}"}}'
    out = [{**s, "values": "5+1x30"} if s["series"] == failures else s for s in series]
    assert out != series, "the scrape has no failure count to grow"
    return [*out, {"series": 'gpubroker_celery_queue_depth{queue="celery"}', "values": "250x30"}]


def _alert(labels: dict[str, str], summary: str, runbook: str = "") -> dict[str, object]:
    annotations = {"summary": summary, **({"runbook": f"docs/operations.md#{runbook}"} if runbook else {})}
    return {"exp_labels": labels, "exp_annotations": annotations}


@pytest.mark.promtool
def test_the_rules_fire_on_what_a_real_scrape_says(client, broken_fleet, tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian's prometheus package)")
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    tenant = broken_fleet.tenant.slug
    cases = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": _series(scrape(client, broken_fleet.owner)),
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "GpubrokerClusterStale", "exp_alerts": []},  # not yet: for 2m
                {"eval_time": "3m", "alertname": "GpubrokerClusterStale", "exp_alerts": [_alert(
                    {"severity": "warning", "cluster": "cloud"},
                    "Cluster cloud has not reported its inventory for 20m 0s", "a-cluster-is-stale")]},
                {"eval_time": "4m", "alertname": "GpubrokerReconcileLag", "exp_alerts": []},  # for 5m
                {"eval_time": "6m", "alertname": "GpubrokerReconcileLag", "exp_alerts": [_alert(
                    {"severity": "critical"}, "No reconciliation pass has finished for 1h 0m 0s",
                    "reconciliation-lags")]},
                {"eval_time": "1m", "alertname": "GpubrokerEscalationWaiting", "exp_alerts": [_alert(
                    {"severity": "warning"}, "An escalation has waited 5h 0m 0s for an admin", "escalations")]},
                {"eval_time": "1m", "alertname": "GpubrokerTenantBudgetNear", "exp_alerts": [_alert(
                    {"severity": "info", "tenant": tenant}, f"Tenant {tenant} has spent 88.89% of its cloud budget")]},
                {"eval_time": "1m", "alertname": "GpubrokerTenantBudgetSpent", "exp_alerts": []},
                # five failures long ago, none since: nothing to say
                {"eval_time": "20m", "alertname": "GpubrokerTaskFailing", "exp_alerts": []},
            ],
        }, {
            "interval": "1m",
            "input_series": _failing_and_backed_up(_series(scrape(client, broken_fleet.owner))),
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "GpubrokerTaskFailing", "exp_alerts": []},  # one failure so far
                {"eval_time": "20m", "alertname": "GpubrokerTaskFailing", "exp_alerts": [_alert(
                    {"severity": "warning", "task": DISPATCH},
                    f"Celery task {DISPATCH} keeps failing (15 failures in 15 minutes)", "tasks-fail")]},
                {"eval_time": "9m", "alertname": "GpubrokerTaskBacklog", "exp_alerts": []},  # for 10m
                {"eval_time": "11m", "alertname": "GpubrokerTaskBacklog", "exp_alerts": [_alert(
                    {"severity": "warning", "queue": "celery"}, "250 tasks wait in Celery queue celery",
                    "the-task-queue-backs-up")]},
            ],
        }],
    }
    spec = tmp_path / "rules-test.yml"
    spec.write_text(yaml.safe_dump(cases))
    run = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
