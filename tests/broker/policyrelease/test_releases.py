"""The lifecycle of a policy version: seeded, proposed, approved by its owner, activated
in one step, rolled back; every move on file."""
from __future__ import annotations

import pytest
from django.core.management import call_command

from broker.models import AuditRecord
from broker.policyrelease.models import PolicyRelease, PolicyTransition, ReleaseState
from broker.policyrelease.services.releases import (
    ReleaseRefused, release_activate, release_approve, release_propose, release_rollback,
)
from broker.services.fleet.policy import current_policy
from tests.broker.policyrelease.test_validation import GOOD
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
CLOUDY = GOOD.replace("weights: {}", "weights: {gpu_cost: 0.1}")


@pytest.fixture
def people():
    return UserFactory(username="proposer", is_staff=True), UserFactory(username="polowner", is_staff=True)


def test_the_policy_file_seeds_the_first_active_version():
    loaded = current_policy()
    first = PolicyRelease.objects.get()
    assert (first.number, first.state, first.version) == (1, ReleaseState.ACTIVE, loaded.version)
    assert [t.to_state for t in first.transitions.all()] == ["draft", "proposed", "approved", "active"]


def test_the_proposer_cannot_approve_and_the_owner_can(people):
    proposer, owner = people
    current_policy()
    release = release_propose(actor=proposer, owner=owner, content=CLOUDY, summary="cheaper")
    with pytest.raises(ReleaseRefused, match="only its owner .polowner. may approve"):
        release_approve(actor=proposer, release_id=release.id)
    assert release_approve(actor=owner, release_id=release.id).state == ReleaseState.APPROVED


def test_the_proposer_cannot_name_themself_owner(people):
    proposer, _ = people
    with pytest.raises(ReleaseRefused) as err:
        release_propose(actor=proposer, owner=proposer, content=CLOUDY)
    assert err.value.field == "owner"


def test_activation_swaps_the_policy_in_force_and_rollback_restores_it(people):
    proposer, owner = people
    old = current_policy().version
    release = release_propose(actor=proposer, owner=owner, content=CLOUDY)
    with pytest.raises(ReleaseRefused):
        release_activate(actor=owner, release_id=release.id)  # not approved yet
    release_approve(actor=owner, release_id=release.id)
    release_activate(actor=owner, release_id=release.id)
    assert current_policy().version == release.version != old
    assert PolicyRelease.objects.get(number=1).state == ReleaseState.RETIRED
    release_rollback(actor=owner, release_id=PolicyRelease.objects.get(number=1).id)
    assert current_policy().version == old
    assert PolicyRelease.objects.filter(state=ReleaseState.ACTIVE).count() == 1
    actions = list(AuditRecord.objects.filter(action__startswith="policy.").values_list("action", flat=True))
    assert actions[-2:] == ["policy.retired", "policy.active"]
    assert {"policy.proposed", "policy.approved", "policy.active", "policy.retired"} <= set(actions)


def test_a_never_active_version_is_no_rollback_target(people):
    proposer, owner = people
    current_policy()
    release = release_propose(actor=proposer, owner=owner, content=CLOUDY)
    from broker.policyrelease.services.releases import release_withdraw
    release_withdraw(actor=proposer, release_id=release.id)
    with pytest.raises(ReleaseRefused, match="never in force"):
        release_rollback(actor=owner, release_id=release.id)


def test_transitions_are_only_added(people):
    proposer, owner = people
    current_policy()
    release = release_propose(actor=proposer, owner=owner, content=CLOUDY)
    release_approve(actor=owner, release_id=release.id)
    rows = list(PolicyTransition.objects.filter(release=release).values_list("from_state", "to_state", "actor__username"))
    assert rows == [("", "draft", "proposer"), ("draft", "proposed", "proposer"), ("proposed", "approved", "polowner")]


def test_export_and_import_move_versions_through_files(tmp_path, people):
    current_policy()
    out = tmp_path / "active.yaml"
    call_command("policy", "export", "--out", str(out))
    assert out.read_text() == GOOD
    changed = tmp_path / "next.yaml"
    changed.write_text(CLOUDY)
    call_command("policy", "import", str(changed))
    draft = PolicyRelease.objects.get(number=2)
    assert (draft.state, draft.content, draft.source) == (ReleaseState.DRAFT, CLOUDY, str(changed))
    call_command("policy", "export", "--all", "--out", str(tmp_path / "all"))
    assert sorted(p.name[:5] for p in (tmp_path / "all").iterdir()) == ["v0001", "v0002"]


def test_an_invalid_file_is_not_imported(tmp_path):
    from django.core.management.base import CommandError
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("preset: on-prem-first", "preset: 3"))
    with pytest.raises(CommandError, match="line .*: preset"):
        call_command("policy", "import", str(bad))
    assert not PolicyRelease.objects.filter(source=str(bad)).exists()


def test_placement_decisions_record_the_version_in_force(people, make_cluster, submit, drive):
    from broker.models import AuditRecord as Audit
    proposer, owner = people
    make_cluster("onprem", nodes=[8])
    old = current_policy().version
    first = drive(submit(gpus_per_worker=1, name="first"))
    release = release_propose(actor=proposer, owner=owner, content=CLOUDY)
    release_approve(actor=owner, release_id=release.id)
    release_activate(actor=owner, release_id=release.id)
    second = drive(submit(gpus_per_worker=1, name="second"))
    assert (first.policy_version, second.policy_version) == (old, release.version)
    decided = Audit.objects.filter(action="placement.decided", workload=second).get()
    assert decided.policy_version == release.version
