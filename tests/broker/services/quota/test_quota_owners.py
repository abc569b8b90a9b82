"""Quota owners: visible and editable with an audit record; an e-mail to the owner when
use passes the quota's alert share, once per crossing."""
from __future__ import annotations

import pytest
from django.core import mail
from django.urls import reverse

from broker.models import AuditRecord, Quota
from broker.services.quota.reservations import reservation_create, reservation_release
from tests.factories import PASSWORD, ClusterFactory, UserFactory, WorkloadFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the mail leaves on commit


@pytest.fixture
def quota(trio, gpu_classes):
    trio.owner.email = "owner@example.org"
    trio.owner.save()
    return Quota.objects.create(tenant=trio.tenant, gpu_class=gpu_classes["a100-80gb"], limit_gpus=10,
                                owner=trio.owner)


def _hold(trio, quota, gpus):
    w = WorkloadFactory(project=trio.project, gpu_class=quota.gpu_class, total_gpus=gpus)
    reservation_create(workload=w, cluster=ClusterFactory(), ttl_s=60)
    return w


def test_the_owner_is_mailed_once_when_use_passes_the_share(trio, quota):
    _hold(trio, quota, 7)
    assert mail.outbox == []
    second = _hold(trio, quota, 1)                     # 8 of 10: 80%
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["owner@example.org"]
    assert "8 of 10 GPUs" in mail.outbox[0].subject
    _hold(trio, quota, 1)                               # still over: no second mail
    assert len(mail.outbox) == 1
    reservation_release(workload=second, reason="done")   # 8 of 10 again: still over
    assert len(mail.outbox) == 1
    assert AuditRecord.objects.filter(action="quota.alert").count() == 1


def test_falling_under_the_share_rearms_the_alert(trio, quota):
    first = _hold(trio, quota, 8)
    reservation_release(workload=first, reason="done")
    assert not Quota.objects.get(id=quota.id).alert_active
    _hold(trio, quota, 9)
    assert len(mail.outbox) == 2


def test_owner_and_share_are_edited_on_their_page_with_an_audit_record(client, trio, quota):
    finance_owner = trio.finance
    assert client.login(username=trio.owner.username, password=PASSWORD)
    page = client.get(reverse("quota-list")).content.decode()
    assert "owner" in page and reverse("quota-owner", args=[quota.id]) in page
    response = client.post(reverse("quota-owner", args=[quota.id]), {"owner": finance_owner.id, "alert_percent": 50})
    assert response.status_code == 302
    quota.refresh_from_db()
    assert (quota.owner, quota.alert_share) == (finance_owner, 0.5)
    record = AuditRecord.objects.get(action="quota.owner_changed")
    assert record.actor == trio.owner and "owner owner -> money" in record.message and "80% -> 50%" in record.message


def test_bad_owner_input_is_a_400_naming_the_field(client, trio, quota):
    stranger = UserFactory(username="stranger")
    assert client.login(username=trio.owner.username, password=PASSWORD)
    response = client.post(reverse("quota-owner", args=[quota.id]), {"owner": stranger.id, "alert_percent": 80})
    assert response.status_code == 400 and "owner" in response.context["form"].errors
    response = client.post(reverse("quota-owner", args=[quota.id]), {"owner": "", "alert_percent": 150})
    assert response.status_code == 400 and "alert_percent" in response.context["form"].errors
    assert Quota.objects.get(id=quota.id).owner == trio.owner


def test_outsider_gets_404_and_researcher_403(client, trio, quota):
    assert client.login(username=trio.outsider.username, password=PASSWORD)
    assert client.get(reverse("quota-owner", args=[quota.id])).status_code == 404
    client.logout()
    assert client.login(username=trio.member.username, password=PASSWORD)
    assert client.get(reverse("quota-owner", args=[quota.id])).status_code in (403, 404)


def test_reservations_show_the_owner_of_their_quota(client, trio, quota):
    _hold(trio, quota, 1)
    assert client.login(username=trio.owner.username, password=PASSWORD)
    page = client.get(reverse("reservation-list")).content.decode()
    assert "Quota owner" in page and f"<td>{trio.owner.username}</td>" in page
