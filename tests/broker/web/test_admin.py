"""The Django admin lists every model for operators and keeps broker records read-only."""
from __future__ import annotations

from django.urls import reverse

from tests.factories import UserFactory, WorkloadFactory


def test_operator_sees_fleet_and_records_in_admin(client, db):
    operator = UserFactory(username="op", is_staff=True, is_superuser=True)
    client.force_login(operator)
    for model in ("cluster", "quota", "gpuclass", "workload", "reservation", "escalation", "auditrecord"):
        assert client.get(reverse(f"admin:broker_{model}_changelist")).status_code == 200, model
    for model in ("tenant", "project", "membership"):
        assert client.get(reverse(f"admin:tenancy_{model}_changelist")).status_code == 200, model
    workload = WorkloadFactory()
    assert client.get(reverse("admin:broker_workload_add")).status_code == 403
    response = client.get(reverse("admin:broker_workload_change", args=[workload.id]))
    assert response.status_code == 200 and b'name="_save"' not in response.content


def test_non_staff_member_cannot_open_admin(trio, login):
    response = login(trio.owner).get(reverse("admin:broker_cluster_changelist"))
    assert response.status_code == 302
