"""The queue page's live refresh scales: pages of 50 with keyset links, polling only while a
row shown can still change (htmx's 286 ends it), and 304 when nothing changed."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from broker.models import Workload
from broker.selectors.workloads import PAGE_SIZE, Cursor
from tests.factories import WorkloadFactory

HX = {"HTTP_HX_REQUEST": "true"}


def _make(project, n: int, state: str = "completed", start: int = 0) -> list[Workload]:
    """``n`` workloads a minute apart, newest last; every fifth pair shares a timestamp."""
    now = timezone.now()
    made = []
    for i in range(start, start + n):
        w = WorkloadFactory(project=project, state=state)
        Workload.objects.filter(id=w.id).update(created_at=now - timedelta(minutes=1000 - (i - i % 5 // 4)))
        made.append(w)
    return made


def _uids(body: str) -> list[str]:
    return re.findall(r'<tr data-uid="([^"]+)"', body)


def _link(body: str, rel: str) -> str | None:
    match = re.search(rf'<a rel="{rel}" href="([^"]+)"', body)
    return match.group(1).replace("&amp;", "&") if match else None


@pytest.fixture
def member(trio, login):
    return login(trio.member)


def test_queue_pages_hold_50_rows_with_keyset_links_and_no_row_twice(trio, member):
    _make(trio.project, 2 * PAGE_SIZE + 20)
    expected = [w.uid for w in Workload.objects.order_by("-created_at", "-id")]
    url = reverse("workload-list")
    first = member.get(url).content.decode()
    assert _uids(first) == expected[:PAGE_SIZE] and _link(first, "prev") is None
    second = member.get(url + _link(first, "next")).content.decode()
    assert _uids(second) == expected[PAGE_SIZE:2 * PAGE_SIZE]
    third = member.get(url + _link(second, "next")).content.decode()
    assert _uids(third) == expected[2 * PAGE_SIZE:] and _link(third, "next") is None
    back = member.get(url + _link(third, "prev")).content.decode()
    assert _uids(back) == _uids(second)
    assert _uids(member.get(url + _link(back, "prev")).content.decode()) == _uids(first)


def test_rows_submitted_meanwhile_do_not_shift_the_older_pages(trio, member):
    _make(trio.project, PAGE_SIZE + 10)
    url = reverse("workload-list")
    first = member.get(url).content.decode()
    _make(trio.project, 5, start=2000)  # five newer submissions arrive
    older = _uids(member.get(url + _link(first, "next")).content.decode())
    assert not set(older) & set(_uids(first)) and len(older) == 10


def test_state_filter_pages_keep_the_filter(trio, member):
    _make(trio.project, PAGE_SIZE + 3, state="running")
    _make(trio.project, 10, state="completed", start=500)
    first = member.get(reverse("workload-list") + "?state=running").content.decode()
    assert "state=running" in _link(first, "next")
    rest = member.get(reverse("workload-list") + _link(first, "next")).content.decode()
    assert len(_uids(rest)) == 3


def test_page_polls_only_while_a_shown_row_can_still_change(trio, member):
    done = _make(trio.project, 3, state="completed")
    page = member.get(reverse("workload-list")).content.decode()
    assert "hx-trigger" not in page  # every row is final: nothing to poll for
    response = member.get(reverse("workload-list"), **HX)
    assert response.status_code == 286  # an old tab still polling is told to stop
    assert _uids(response.content.decode()) == [w.uid for w in reversed(done)]

    Workload.objects.filter(id=done[0].id).update(state="running")
    page = member.get(reverse("workload-list")).content.decode()
    assert 'hx-trigger="every 2s"' in page
    assert member.get(reverse("workload-list"), **HX).status_code == 200


def test_unchanged_refresh_answers_304_and_a_change_answers_200(trio, member):
    (w,) = _make(trio.project, 1, state="queued")
    first = member.get(reverse("workload-list"), **HX)
    etag = first["ETag"]
    assert first.status_code == 200 and etag and "HX-Request" in first["Vary"]

    again = member.get(reverse("workload-list"), HTTP_IF_NONE_MATCH=etag, **HX)
    assert again.status_code == 304 and again.content == b""

    Workload.objects.filter(id=w.id).update(state="running")  # .update(): updated_at stays as it was
    changed = member.get(reverse("workload-list"), HTTP_IF_NONE_MATCH=etag, **HX)
    assert changed.status_code == 200 and changed["ETag"] != etag and 'data-state="running"' in changed.content.decode()


def test_new_submission_on_the_first_page_changes_its_etag(trio, member):
    _make(trio.project, 2, state="queued")
    etag = member.get(reverse("workload-list"), **HX)["ETag"]
    WorkloadFactory(project=trio.project, state="submitted")
    assert member.get(reverse("workload-list"), HTTP_IF_NONE_MATCH=etag, **HX).status_code == 200


@pytest.mark.parametrize("query, field", [
    ("?before=yesterday", "before"), ("?after=12.x", "after"), ("?state=bogus", "state"),
    ("?before=1.1&after=2.2", "before, after"), ("?page=2", "page"), ("?before=9" * 30, "before"),
])
def test_bad_page_parameters_are_a_400_naming_the_field(trio, member, query, field):
    response = member.get(reverse("workload-list") + query)
    assert response.status_code == 400 and field in response.content.decode()


def test_outsider_sees_none_of_our_rows_on_any_page(trio, login):
    ours = _make(trio.project, PAGE_SIZE + 1, state="running")
    client = login(trio.outsider)
    body = client.get(reverse("workload-list")).content.decode()
    assert not set(_uids(body)) & {w.uid for w in ours}
    cursor = Cursor(ours[-1].created_at, ours[-1].id).encode()
    assert not set(_uids(client.get(reverse("workload-list") + f"?before={cursor}").content.decode())) & {
        w.uid for w in ours}
    assert client.get(reverse("workload-list"), **HX).status_code == 286  # nothing of theirs can change


def test_cursor_round_trips_to_the_microsecond(trio):
    (w,) = _make(trio.project, 1)
    w.refresh_from_db()
    assert Cursor.decode(Cursor(w.created_at, w.id).encode()) == Cursor(w.created_at, w.id)


def test_pages_over_several_projects_follow_the_plain_order_both_ways(trio):
    from broker.selectors.workloads import workload_list, workload_page
    from tests.factories import ProjectFactory

    projects = [trio.project] + [ProjectFactory(tenant=trio.tenant, slug=f"p{i}", slurm_account=f"p{i}",
                                                k8s_namespace=f"p{i}") for i in range(2)]
    for i, project in enumerate(projects):
        _make(project, 9, state=("running", "completed", "queued")[i], start=i * 3)  # interleaved, ties too
    plain = [w.uid for w in workload_list(user=trio.member).order_by("-created_at", "-id")]
    running = [w.uid for w in workload_list(user=trio.member, state="running").order_by("-created_at", "-id")]

    seen, page = [], workload_page(user=trio.member, limit=4)
    while True:
        seen += [r["uid"] for r in page.rows]
        if page.older is None:
            break
        older = page.older
        page = workload_page(user=trio.member, before=older, limit=4)
        back = workload_page(user=trio.member, after=page.newer, limit=4)
        assert back.older == older and [r["uid"] for r in back.rows] == seen[-len(back.rows):]
    assert seen == plain
    assert [r["uid"] for r in workload_page(user=trio.member, state="running", limit=50).rows] == running
    assert workload_page(user=trio.outsider, limit=50).rows == []


def test_a_400_does_not_echo_markup(trio, member):
    response = member.get(reverse("workload-list") + "?state=<script>alert(1)</script>")
    assert response.status_code == 400 and response["Content-Type"].startswith("text/plain")
