"""The submit form's Preview button and Run again (with or without changes)."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from broker.models import Reservation, Workload

FORM = {"name": "form-job", "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 2,
        "workers": 2, "cpus_per_worker": 4, "memory_gb_per_worker": 16, "time_limit_minutes": 30,
        "priority": "normal"}
HTMX = {"HTTP_HX_REQUEST": "true"}


def test_submit_form_has_a_preview_button(trio, quota, login):
    body = login(trio.member).get(reverse("workload-new")).content.decode()
    assert 'id="preview-button"' in body and reverse("workload-preview") in body


def test_submit_form_labels_spell_gpu_cpu_and_units_as_researchers_write_them(trio, quota, login):
    body = login(trio.member).get(reverse("workload-new")).content.decode()
    for label in ("GPU class", "GPUs per worker", "CPUs per worker", "Memory per worker (GB)", "MIG profile"):
        assert f">{label} <" in body, label
    assert "Gpu" not in body and "Cpus" not in body


def test_preview_shows_the_ranked_destinations_with_cost_and_stores_nothing(trio, quota, make_cluster, login):
    make_cluster("onprem")
    response = login(trio.member).post(reverse("workload-preview"), {"project": trio.project.id, **FORM}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and 'data-preview="ok"' in body
    assert 'data-destination="onprem"' in body and "<td data-cost>2.40</td>" in body  # 2 GPU-h x 1.2
    assert "data-preview-quota>64<" in body
    assert not Workload.objects.exists() and not Reservation.objects.exists()


def test_preview_with_a_bad_field_names_it(trio, quota, make_cluster, login):
    make_cluster("onprem")
    client = login(trio.member)
    response = client.post(reverse("workload-preview"), {"project": trio.project.id, **FORM, "name": "Bad!"}, **HTMX)
    assert response.status_code == 200 and 'data-field="name"' in response.content.decode()
    plain = client.post(reverse("workload-preview"), {"project": trio.project.id, **FORM, "mig_profile": "huge"})
    assert plain.status_code == 400 and 'data-field="mig_profile"' in plain.content.decode()
    assert not Workload.objects.exists()


def test_outsider_cannot_preview_into_another_tenants_project(trio, quota, make_cluster, login):
    make_cluster("onprem")
    response = login(trio.outsider).post(reverse("workload-preview"), {"project": trio.project.id, **FORM})
    assert response.status_code == 400 and 'data-field="project"' in response.content.decode()
    assert 'data-destination' not in response.content.decode()


@pytest.fixture
def ended(submit):
    workload = submit(name="first", gpus_per_worker=2, workers=2, time_limit_minutes=45, residency=["eu-west"])
    Workload.objects.filter(id=workload.id).update(state="failed", ended_at=timezone.now())
    return Workload.objects.get(id=workload.id)


def test_ended_workload_page_offers_run_again_with_and_without_changes(trio, ended, login):
    body = login(trio.member).get(reverse("workload-detail", args=[ended.id])).content.decode()
    assert reverse("workload-run-again", args=[ended.id]) in body
    assert f"{reverse('workload-new')}?from={ended.id}" in body


def test_run_again_submits_the_same_spec_linked_to_the_ended_one(trio, ended, login):
    response = login(trio.member).post(reverse("workload-run-again", args=[ended.id]))
    again = Workload.objects.exclude(id=ended.id).get()
    assert response.status_code == 302 and response["Location"] == reverse("workload-detail", args=[again.id])
    assert again.resubmit_of == ended and again.spec == ended.spec and again.submitted_by == trio.member


def test_run_again_with_changes_prefills_the_form_and_links_the_new_workload(trio, ended, login):
    client = login(trio.member)
    body = client.get(reverse("workload-new"), {"from": ended.id}).content.decode()
    assert 'value="first"' in body and 'value="45"' in body and 'value="eu-west"' in body
    assert f'name="resubmit_of" value="{ended.id}"' in body and f'data-resubmit-of="{ended.id}"' in body
    response = client.post(reverse("workload-new"), {"project": trio.project.id, **FORM, "name": "second",
                                                      "resubmit_of": ended.id})
    again = Workload.objects.get(name="second")
    assert response.status_code == 302 and again.resubmit_of == ended and again.total_gpus == 4


def test_a_workload_still_running_cannot_be_run_again(trio, submit, login):
    workload = submit()
    assert login(trio.member).post(reverse("workload-run-again", args=[workload.id])).status_code == 403
    assert Workload.objects.count() == 1


def test_outsider_cannot_run_again_or_prefill_from_another_tenants_workload(trio, ended, login):
    client = login(trio.outsider)
    assert client.post(reverse("workload-run-again", args=[ended.id])).status_code == 404
    assert client.get(reverse("workload-new"), {"from": ended.id}).status_code == 404
    assert Workload.objects.count() == 1


def test_the_form_asks_for_a_topology_level_and_the_preview_says_where_the_gang_keeps_it(trio, quota, make_cluster,
                                                                                         login):
    make_cluster("spread", flavor="kueue", nodes=[2, 2])
    make_cluster("one-host", flavor="kueue", nodes=[4])
    client = login(trio.member)
    assert 'name="topology_level"' in client.get(reverse("workload-new")).content.decode()
    ask = {"project": trio.project.id, **FORM, "topology_level": "host", "topology_mode": "preferred"}
    body = client.post(reverse("workload-preview"), ask, **HTMX).content.decode()
    assert "<th>Preferred level</th>" in body
    assert "<td data-topology>in one host</td>" in body
    assert "<td data-topology>not in one host: no domain holds the gang now (score +4)</td>" in body
    # without a level the select's default is not sent on as a mode with no level
    plain = client.post(reverse("workload-preview"), {"project": trio.project.id, **FORM,
                                                      "topology_mode": "required"}, **HTMX).content.decode()
    assert 'data-preview="ok"' in plain and "Preferred level" not in plain


def test_a_submitted_gang_shows_its_topology_level_on_its_page(trio, quota, make_cluster, login, submit):
    make_cluster("one-host", flavor="kueue", nodes=[4])
    workload = submit(workers=2, topology_level="host")
    body = login(trio.member).get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert '<span id="topology-level">workers in one host (required)</span>' in body
    assert login(trio.outsider).get(reverse("workload-detail", args=[workload.id])).status_code == 404
