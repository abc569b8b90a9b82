"""The outage switch on the clusters page: operators only, audited, stale shown at once."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import AuditRecord
from tests.factories import UserFactory


@pytest.fixture
def operator(db):
    return UserFactory(username="operator", is_staff=True)


def test_an_operator_cuts_a_cluster_off_and_the_page_shows_it_stale(operator, make_cluster, sim, client):
    cluster = make_cluster("onprem")
    client.force_login(operator)
    page = client.get(reverse("cluster-list")).content.decode()
    assert 'data-outage="start"' in page and "stale: no new placements" not in page

    response = client.post(reverse("cluster-outage", args=[cluster.id]), {"outage": "start"})
    assert response.status_code == 302 and response["Location"].endswith("/clusters/#cluster-onprem")
    page = client.get(reverse("cluster-list")).content.decode()
    assert "stale: no new placements" in page and 'data-health="stale"' in page
    assert 'data-outage="end"' in page and "is now unreachable (simulated outage)" in page
    assert sim.get("onprem").faults.unreachable

    client.post(reverse("cluster-outage", args=[cluster.id]), {"outage": "end"})
    page = client.get(reverse("cluster-list")).content.decode()
    assert 'data-health="healthy"' in page and 'data-outage="start"' in page
    assert AuditRecord.objects.filter(action__startswith="cluster.outage", actor=operator).count() == 2


@pytest.mark.parametrize("who", ["member", "owner", "finance", "outsider"])
def test_everyone_but_operators_is_refused_and_sees_no_switch(trio, make_cluster, sim, login, who):
    cluster = make_cluster("onprem")
    client = login(getattr(trio, who))
    assert 'data-outage=' not in client.get(reverse("cluster-list")).content.decode()
    assert client.post(reverse("cluster-outage", args=[cluster.id]), {"outage": "start"}).status_code == 403
    assert not sim.get("onprem").faults.unreachable


def test_a_user_outside_every_tenant_gets_404(make_cluster, client):
    cluster = make_cluster("onprem")
    client.force_login(UserFactory(username="stranger"))
    assert client.post(reverse("cluster-outage", args=[cluster.id]), {"outage": "start"}).status_code == 404


def test_anonymous_is_sent_to_log_in(make_cluster, client):
    cluster = make_cluster("onprem")
    response = client.post(reverse("cluster-outage", args=[cluster.id]), {"outage": "start"})
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.parametrize("data, named", [({"outage": "sideways"}, "outage"), ({}, "outage"),
                                         ({"outage": "start", "outgae": "x"}, "outgae")])
def test_bad_input_is_a_400_naming_the_field(operator, make_cluster, sim, client, data, named):
    cluster = make_cluster("onprem")
    client.force_login(operator)
    response = client.post(reverse("cluster-outage", args=[cluster.id]), data)
    assert response.status_code == 400 and named in response.content.decode()
    assert not sim.get("onprem").faults.unreachable


def test_the_switch_only_answers_post(operator, make_cluster, client):
    cluster = make_cluster("onprem")
    client.force_login(operator)
    assert client.get(reverse("cluster-outage", args=[cluster.id])).status_code == 405
