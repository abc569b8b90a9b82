"""The pages refuse what the API refuses: a huge quota number is a form error (never a
500), and a misspelt data location is an error on its field in the submit form."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import Cluster, Quota, Workload

HUGE = str(2**64)
FORM = {"name": "form-job", "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 1,
        "workers": 1, "cpus_per_worker": 4, "memory_gb_per_worker": 16, "time_limit_minutes": 30,
        "priority": "normal"}


@pytest.mark.parametrize("data", [{"limit_gpus": HUGE, "borrow_limit_gpus": 0},
                                  {"limit_gpus": 8, "borrow_limit_gpus": HUGE},
                                  {"limit_gpus": str(2**63 + 1)}])
def test_quota_inline_edit_with_a_huge_number_is_refused_not_500(trio, quota, login, data):
    client = login(trio.owner)
    response = client.post(reverse("quota-edit", args=[quota.id]), data, HTTP_HX_REQUEST="true")
    assert response.status_code == 422 and "less than or equal to" in response.content.decode()
    plain = client.post(reverse("quota-edit", args=[quota.id]), data)
    assert plain.status_code == 302  # back to the list, with the error as a message
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus) == (64, 0)


def test_submit_form_names_a_misspelt_data_location(trio, quota, make_cluster, login):
    make_cluster("onprem")
    Cluster.objects.update(config={"data_locations": ["onprem-nfs"], "image_pull_s": 0})
    client = login(trio.member)
    response = client.post(reverse("workload-new"), {"project": trio.project.id, **FORM,
                                                     "data_location": "onprem-nsf"})
    body = response.content.decode()
    assert response.status_code == 200 and 'data-field="data_location"' in body and "onprem-nfs" in body
    assert not Workload.objects.exists()
    response = client.post(reverse("workload-new"), {"project": trio.project.id, **FORM,
                                                     "data_location": "onprem-nfs"})
    assert response.status_code == 302 and Workload.objects.get().spec["data_location"] == "onprem-nfs"


def test_submit_form_refuses_huge_numbers_on_their_field(trio, quota, login):
    response = login(trio.member).post(reverse("workload-new"), {"project": trio.project.id, **FORM,
                                                                 "gpus_per_worker": HUGE})
    assert response.status_code == 200 and 'data-field="gpus_per_worker"' in response.content.decode()
    assert not Workload.objects.exists() and Quota.objects.get().limit_gpus == 64
