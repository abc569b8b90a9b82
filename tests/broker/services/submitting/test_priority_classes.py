"""Fleet priority classes at submission: a class of the policy sets the priority to its level
and is kept on the workload; an unknown or ungranted class, or a priority that contradicts
it, is refused naming the field (the form, the API, the preview); the page and the form show it."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import Workload
from broker.placement.policy import PolicyError
from broker.placement.policy_loader import load_policy
from broker.services.fleet.policy import current_policy, policy_override
from broker.services.submitting.preview import workload_preview
from broker.spec import SpecError

SPEC = {"name": "urgent", "command": "run", "gpu_class": "a100-80gb", "gpus_per_worker": 2}


def test_a_class_sets_the_priority_to_its_level_and_is_kept(trio, quota, submit):
    production = submit(priority_class="production")
    scavenger = submit(name="sweep", priority_class="scavenger")
    assert (production.spec["priority"], production.spec["priority_class"]) == ("high", "production")
    assert (scavenger.spec["priority"], scavenger.spec["priority_class"]) == ("low", "scavenger")
    assert submit(name="plain").spec["priority_class"] == ""


def test_an_unknown_class_is_refused_naming_the_field_and_the_policys_classes(trio, quota, submit):
    with pytest.raises(SpecError) as caught:
        submit(priority_class="urgent")
    assert caught.value.errors == {
        "priority_class": ["unknown priority class 'urgent'; the policy has production, normal, scavenger."]}
    assert not Workload.objects.exists()


def test_a_tenant_may_submit_only_at_the_classes_granted_to_it(trio, quota, submit):
    text = current_policy().text.replace("  physics:\n", "  physics:\n    priority_classes: [normal, scavenger]\n", 1)
    with policy_override(text):
        with pytest.raises(SpecError) as caught:
            submit(priority_class="production")
        assert caught.value.errors["priority_class"] == [
            "tenant physics may not submit at priority class production; the policy grants normal, scavenger."]
        assert submit(priority_class="scavenger").spec["priority"] == "low"


def test_a_priority_that_contradicts_the_class_is_refused(trio, quota, submit):
    with pytest.raises(SpecError) as caught:
        submit(priority="low", priority_class="production")
    assert "priority class production is at level high" in caught.value.errors["priority"][0]


def test_the_preview_and_the_api_refuse_the_same_way(trio, quota, api, make_cluster):
    make_cluster("onprem")
    with pytest.raises(SpecError):
        workload_preview(user=trio.member, project_id=trio.project.id, spec_data={**SPEC, "priority_class": "nope"})
    refused = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC,
                                                                "priority_class": "nope"})
    assert refused.status_code == 400 and "unknown priority class 'nope'" in \
        refused.json()["error"]["fields"]["priority_class"][0]
    made = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC,
                                                             "priority_class": "production"})
    assert made.status_code == 201 and made.json()["spec"]["priority"] == "high"
    outsider = api(trio.outsider).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC,
                                                                   "priority_class": "production"})
    assert outsider.status_code == 404


def test_the_form_offers_the_classes_and_the_workload_page_names_the_class(
        trio, quota, login, make_cluster):
    make_cluster("onprem")
    client = login(trio.member)
    form = client.get(reverse("workload-new")).content.decode()
    assert '<option value="production">production (high)</option>' in form
    answer = client.post(reverse("workload-new"), {"project": trio.project.id, "name": "by-form", "command": "run",
                                          "gpu_class": "a100-80gb", "gpus_per_worker": 1,
                                          "workers": 1, "cpus_per_worker": 1, "memory_gb_per_worker": 1,
                                          "time_limit_minutes": 10, "priority": "normal",
                                          "priority_class": "scavenger"})
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    workload = Workload.objects.get(name="by-form")
    page = client.get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert "priority low (class scavenger)" in page


@pytest.mark.parametrize("text, key", [
    ("priority_classes:\n  rush: {}\n", "priority_classes.rush.level"),
    ("priority_classes:\n  rush: {level: urgent}\n", "priority_classes.rush.level"),
    ("priority_classes:\n  rush: {level: high, lsf_queue: x}\n", "priority_classes.rush.lsf_queue"),
    ("priority_classes:\n  rush: {level: high}\ntenants:\n  physics: {priority_classes: [rsh]}\n",
     "tenants.physics.priority_classes"),
])
def test_a_bad_priority_class_in_the_policy_is_named(text, key):
    with pytest.raises(PolicyError) as caught:
        load_policy(text)
    assert caught.value.key == key
