"""Who may submit at which priority: the policy's grant to each tenant, checked at submission
(the form, the API, the CLI) and in the preview, with the field and the grant named."""
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


def _grant(*priorities: str):
    """The policy in force with tenant physics granted only ``priorities``."""
    text = current_policy().text
    assert "\n  physics:\n" in text
    granted = f"\n  physics:\n    priorities: [{', '.join(priorities)}]\n"
    return policy_override(text.replace("\n  physics:\n", granted, 1))


def test_a_tenant_without_the_grant_is_refused_high_priority_naming_the_field_and_the_grant(trio, quota, submit):
    with _grant("low", "normal"):
        with pytest.raises(SpecError) as caught:
            submit(priority="high")
        assert caught.value.errors == {
            "priority": ["tenant physics may not submit at priority high; the policy grants low, normal."]}
        assert not Workload.objects.exists()
        assert submit(priority="normal").spec["priority"] == "normal"


def test_the_preview_refuses_it_the_same_way(trio, quota, make_cluster):
    make_cluster("onprem")
    with _grant("low"), pytest.raises(SpecError) as caught:
        workload_preview(user=trio.member, project_id=trio.project.id, spec_data=SPEC)  # normal: not granted
    assert "may not submit at priority normal; the policy grants low." in caught.value.errors["priority"][0]


def test_the_api_answers_400_naming_priority_and_the_outsider_404(trio, quota, api):
    with _grant("low", "normal"):
        response = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC,
                                                                    "priority": "high"})
        assert response.status_code == 400
        assert "policy grants low, normal" in response.json()["error"]["fields"]["priority"][0]
        outsider = api(trio.outsider).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC})
        assert outsider.status_code == 404


def test_by_default_every_priority_is_granted(trio, quota, submit):
    assert submit(priority="high").spec["priority"] == "high"


def test_a_grant_of_an_unknown_priority_names_the_policy_key():
    with pytest.raises(PolicyError) as caught:
        load_policy("tenants:\n  physics:\n    priorities: [urgent]\n")
    assert caught.value.key == "tenants.physics.priorities" and "'urgent'" in str(caught.value)
