"""The Django admin saves quotas through the services: locked, audited, never below use."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import AuditRecord, Quota
from tests.factories import UserFactory


@pytest.fixture
def placed(make_cluster, submit, drive):
    """4 GPUs of the tenant's a100-80gb quota reserved by a placed workload."""
    make_cluster("onprem")
    return drive(submit(gpus_per_worker=2, workers=2))


@pytest.fixture
def operator_client(client, db):
    client.force_login(UserFactory(username="op", is_staff=True, is_superuser=True))
    return client


def _change(client, quota: Quota, **values):
    form = {"limit_gpus": quota.limit_gpus, "borrow_limit_gpus": quota.borrow_limit_gpus,
            "owner": quota.owner_id or "", "alert_share": quota.alert_share, **values}
    return client.post(reverse("admin:broker_quota_change", args=[quota.id]), form)


def test_admin_lowering_a_quota_below_use_gets_the_refusal_on_the_form_and_the_row_is_unchanged(
        trio, placed, operator_client):
    quota = Quota.objects.get(tenant=trio.tenant)
    before = (quota.limit_gpus, quota.borrow_limit_gpus, quota.updated_at)
    response = _change(operator_client, quota, limit_gpus=3)
    assert response.status_code == 200  # the form again, not a 500 and not a redirect
    assert "3 GPUs is below the 4 GPUs already reserved or running" in response.content.decode()
    assert response.context["adminform"].form.errors["limit_gpus"]
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus, quota.updated_at) == before
    assert not AuditRecord.objects.filter(action="quota.changed").exists()


def test_admin_quota_change_goes_through_the_service_and_writes_an_audit_record(trio, placed, operator_client):
    quota = Quota.objects.get(tenant=trio.tenant)
    response = _change(operator_client, quota, limit_gpus=40, borrow_limit_gpus=4)
    assert response.status_code == 302
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus) == (40, 4)
    record = AuditRecord.objects.get(action="quota.changed")
    assert record.actor.username == "op" and "-> 40+4 GPUs" in record.message


def test_admin_owner_change_is_checked_and_audited_by_the_owner_service(trio, quota, operator_client):
    refused = _change(operator_client, quota, owner=trio.outsider.id)  # not a member of the tenant
    assert refused.status_code == 200 and refused.context["adminform"].form.errors["owner"]
    assert Quota.objects.get(id=quota.id).owner is None
    assert _change(operator_client, quota, owner=trio.owner.id, alert_share=0.5).status_code == 302
    quota.refresh_from_db()
    assert quota.owner == trio.owner and quota.alert_share == 0.5
    assert AuditRecord.objects.filter(action="quota.owner_changed", actor__username="op").count() == 1


def test_admin_adds_a_quota_through_the_service(trio, gpu_classes, operator_client):
    response = operator_client.post(reverse("admin:broker_quota_add"), {
        "tenant": trio.tenant.id, "gpu_class": gpu_classes["a100-80gb"].id, "limit_gpus": 8,
        "borrow_limit_gpus": 0, "owner": "", "alert_share": 0.8})
    assert response.status_code == 302
    assert Quota.objects.get(tenant=trio.tenant).limit_gpus == 8
    assert AuditRecord.objects.filter(action="quota.changed", tenant=trio.tenant).count() == 1


def test_tenant_members_and_outsiders_cannot_reach_the_quota_admin(trio, quota, client):
    for user in (trio.owner, trio.outsider):
        client.force_login(user)
        response = _change(client, quota, limit_gpus=1)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert Quota.objects.get(id=quota.id).limit_gpus == 64
