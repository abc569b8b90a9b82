"""A bad policy is refused with its field and line; the policy in force stays as it was."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.policyrelease.models import PolicyRelease
from broker.policyrelease.services.releases import release_propose
from broker.policyrelease.validation import PolicyInvalid, check_policy
from broker.services.fleet.policy import current_policy
from tests.factories import UserFactory

GOOD = (Path(__file__).resolve().parents[3] / "broker" / "policy" / "default.yaml").read_text()


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_an_unknown_key_is_named_with_its_line():
    text = GOOD.replace("  max_boost: 10", "  max_boost: 10\n  max_bost: 3")
    with pytest.raises(PolicyInvalid) as err:
        check_policy(text)
    assert err.value.problem.field == "aging.max_bost"
    assert err.value.problem.line == _line_of(text, "max_bost:")
    assert "unknown key" in err.value.problem.message


def test_a_wrong_type_is_named_with_its_line():
    text = GOOD.replace("staleness_limit_s: 300", "staleness_limit_s: soon")
    with pytest.raises(PolicyInvalid) as err:
        check_policy(text)
    assert (err.value.problem.field, err.value.problem.line) == ("staleness_limit_s", _line_of(text, "staleness_limit_s"))
    assert "number" in err.value.problem.message


def test_a_reference_to_an_unknown_gpu_class_is_named_with_its_line():
    text = GOOD.replace("gpu_classes: [a100-80gb, a100-40gb, h100]", "gpu_classes: [a100-80gb, b200]")
    with pytest.raises(PolicyInvalid) as err:
        check_policy(text)
    assert err.value.problem.field == "tenants.physics.gpu_classes"
    assert err.value.problem.line == _line_of(text, "[a100-80gb, b200]")
    assert "b200" in err.value.problem.message


def test_broken_yaml_names_its_line():
    with pytest.raises(PolicyInvalid) as err:
        check_policy("preset: on-prem-first\nweights: {queue_wait_s: 1\n")
    assert err.value.problem.field == "(yaml)" and err.value.problem.line


@pytest.mark.django_db
def test_a_refused_proposal_leaves_the_policy_in_force_untouched():
    before = current_policy().version
    author, owner = UserFactory(is_staff=True), UserFactory(is_staff=True)
    with pytest.raises(PolicyInvalid):
        release_propose(actor=author, owner=owner, content=GOOD.replace("preset: on-prem-first", "preset: fastest\nbogus: 1"))
    assert current_policy().version == before
    assert list(PolicyRelease.objects.values_list("number", flat=True)) == [1]
