"""broker.selectors.workloads.workload_newest, the queue page's rows (see bench/bench_queue_page.py):
the same rows, in the same order, as the plain ordered list it replaces, on every path."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from broker.selectors import workloads as selectors
from broker.models import Workload
from tests.factories import MembershipFactory, ProjectFactory, WorkloadFactory


@pytest.fixture
def spread(trio, gpu_classes):
    """30 workloads over three projects of tenant A (ties in created_at included) and 5 of B."""
    extra = [ProjectFactory(tenant=trio.tenant, slug=f"p{i}", slurm_account=f"p{i}", k8s_namespace=f"p{i}")
             for i in range(2)]
    projects = [trio.project, *extra]
    now = timezone.now()
    for i in range(30):
        w = WorkloadFactory(project=projects[i % 3], state=("running", "queued", "completed")[i % 3 if i % 2 else 2])
        # every third pair shares a timestamp: the id breaks the tie
        Workload.objects.filter(id=w.id).update(created_at=now - timedelta(minutes=(i * 7) % 31 // 2))
    for _ in range(5):
        WorkloadFactory(project=trio.other_project)
    return projects


def _plain(user, state="", limit=200):
    return list(selectors.workload_list(user=user, state=state).order_by("-created_at", "-id")[:limit])


@pytest.mark.parametrize("state, limit", [("", 200), ("", 7), ("running", 200), ("running", 3), ("failed", 5)])
def test_newest_equals_the_plain_ordered_list(trio, spread, state, limit):
    expected = _plain(trio.member, state, limit)
    assert list(selectors.workload_newest(user=trio.member, state=state, limit=limit)) == expected
    assert all(w.project.tenant_id == trio.tenant.id for w in expected)


def test_newest_merged_in_python_equals_the_plain_list(trio, spread, monkeypatch):
    monkeypatch.setattr(connection.features, "supports_slicing_ordering_in_compound", False)
    assert list(selectors.workload_newest(user=trio.member, limit=11)) == _plain(trio.member, limit=11)


def test_newest_falls_back_to_one_query_over_many_projects(trio, spread, monkeypatch):
    monkeypatch.setattr(selectors, "NEWEST_MAX_PROJECTS", 1)
    assert list(selectors.workload_newest(user=trio.member, limit=9)) == _plain(trio.member, limit=9)


def test_newest_for_one_project_and_for_none(trio, spread, db):
    from tests.factories import UserFactory

    single = UserFactory(username="single")
    MembershipFactory(user=single, tenant=trio.tenant, project=spread[1])
    assert list(selectors.workload_newest(user=single)) == _plain(single)
    assert len(_plain(single)) == 10
    assert list(selectors.workload_newest(user=trio.finance)) == []


def test_newest_never_shows_another_tenants_workloads(trio, spread):
    mine = {w.id for w in selectors.workload_newest(user=trio.outsider)}
    assert mine == set(Workload.objects.filter(project=trio.other_project).values_list("id", flat=True))


def test_queue_page_lists_the_newest_first_with_few_queries(trio, spread, login, django_assert_max_num_queries):
    client = login(trio.member)
    with django_assert_max_num_queries(10):
        body = client.get(reverse("workload-list"), HTTP_HX_REQUEST="true").content.decode()
    uids = [w.uid for w in _plain(trio.member)]
    positions = [body.index(uid) for uid in uids]
    assert positions == sorted(positions) and len(uids) == 30
