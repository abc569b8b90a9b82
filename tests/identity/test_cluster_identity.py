"""Cluster identities (services and the mapping down to the backends): one POSIX name per
person, set by admins or taken from a sign-in claim, audited, and passed to the clusters
only for projects whose jobs run as the person."""
from __future__ import annotations

import pytest

from broker.backends.registry import identity_for
from broker.models import AuditRecord
from portal.identity.models import ClusterIdentity
from portal.identity.services.cluster_identity import (
    IdentityInvalid, cluster_identity_clear, cluster_identity_from_claims, cluster_identity_set,
    project_run_as_set)
from portal.identity.services.provisioning import identity_sign_in
from tests.factories import MembershipFactory, ProjectFactory, TenantFactory, UserFactory


@pytest.fixture
def people(db):
    tenant, other = TenantFactory(slug="physics"), TenantFactory(slug="biology")
    admin, alice = UserFactory(username="admin"), UserFactory(username="alice")
    MembershipFactory(user=admin, tenant=tenant, role="admin")
    MembershipFactory(user=alice, tenant=tenant, role="researcher")
    MembershipFactory(user=alice, tenant=other, role="researcher")
    return admin, alice, ProjectFactory(tenant=tenant, slug="lattice", slurm_account="lattice")


def test_set_audits_once_per_tenant_of_the_person_and_an_unchanged_set_writes_nothing(people):
    admin, alice, _ = people
    cluster_identity_set(actor=admin, user=alice, posix_user="gpb-alice", posix_group="physics")
    cluster_identity_set(actor=admin, user=alice, posix_user="gpb-alice", posix_group="physics")
    records = AuditRecord.objects.filter(action="identity.cluster_identity_set")
    assert sorted(records.values_list("tenant__slug", flat=True)) == ["biology", "physics"]
    assert records.first().inputs["after"] == {"posix_user": "gpb-alice", "posix_group": "physics", "k8s_user": ""}
    assert cluster_identity_clear(actor=admin, user=alice) and not cluster_identity_clear(actor=admin, user=alice)
    assert AuditRecord.objects.filter(action="identity.cluster_identity_cleared").count() == 2


@pytest.mark.parametrize("fields, bad", [
    ({"posix_user": "Alice"}, "posix_user"), ({"posix_user": "slurm"}, "posix_user"),
    ({"posix_user": "-alice"}, "posix_user"), ({"posix_user": "ok", "posix_group": "root"}, "posix_group"),
    ({"posix_user": "ok", "k8s_user": "system:masters"}, "k8s_user"),
    ({"posix_user": "ok", "k8s_user": "alice smith"}, "k8s_user"),
])
def test_malformed_or_system_names_are_refused_by_field(people, fields, bad):
    admin, alice, _ = people
    with pytest.raises(IdentityInvalid) as exc:
        cluster_identity_set(actor=admin, user=alice, **fields)
    assert list(exc.value.fields) == [bad] and not ClusterIdentity.objects.exists()


def test_only_the_person_runs_as_their_identity_and_only_in_run_as_person_projects(people):
    admin, alice, project = people
    cluster_identity_set(actor=admin, user=alice, posix_user="gpb-alice", k8s_user="alice@example.org")
    as_account = identity_for(project, alice)
    assert (as_account.run_as_person, as_account.run_as_user, as_account.k8s_user) == (False, "", "")
    project = project_run_as_set(actor=admin, project=project, run_as="person")
    as_person = identity_for(project, alice)
    assert (as_person.run_as_person, as_person.run_as_user, as_person.k8s_user) == (
        True, "gpb-alice", "alice@example.org")
    nobody = identity_for(project, admin)  # no identity: a Slurm backend refuses it
    assert nobody.run_as_person and not nobody.run_as_user
    with pytest.raises(IdentityInvalid):
        project_run_as_set(actor=admin, project=project, run_as="root")


def test_sign_in_claim_sets_the_identity_but_never_overrides_an_admins(people, settings):
    settings.GPUBROKER_OIDC_POSIX_CLAIM = "uid"
    admin, alice, _ = people
    bob = identity_sign_in(issuer="https://idp", claims={"sub": "b1", "preferred_username": "bob", "uid": "bbob"})
    assert (bob.cluster_identity.posix_user, bob.cluster_identity.source) == ("bbob", "claim")
    identity_sign_in(issuer="https://idp", claims={"sub": "b1", "preferred_username": "bob", "uid": "Not Valid"})
    assert ClusterIdentity.objects.get(user=bob).posix_user == "bbob"  # a malformed claim changes nothing
    assert AuditRecord.objects.filter(action="identity.cluster_identity_refused").exists()
    cluster_identity_set(actor=admin, user=alice, posix_user="gpb-alice")
    cluster_identity_from_claims(user=alice, claims={"uid": "alice2"}, claim="uid")
    assert ClusterIdentity.objects.get(user=alice).posix_user == "gpb-alice"
