"""Reads of cluster identities, scoped to the acting user: a tenant admin sees the people
of the tenants they administer (operators: everyone); anyone else finds nobody (404)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import Http404

from portal.identity.models import ClusterIdentity
from portal.tenancy.access import is_operator, memberships
from portal.tenancy.models import Membership, Role
from portal.tenancy.access import AnyUser
from portal.tenancy.models import RunAs


def people_list(*, user: AnyUser) -> QuerySet:
    """The people whose cluster identity ``user`` may see, with their identity."""
    people = get_user_model().objects.filter(is_active=True).select_related("cluster_identity")
    if not is_operator(user):
        tenants = memberships(user, Role.ADMIN).values("tenant_id")
        people = people.filter(memberships__tenant_id__in=tenants)
    return people.distinct().order_by("username")


def person_get(*, user: AnyUser, person_id: int):
    person = people_list(user=user).filter(id=person_id).first()
    if person is None:
        raise Http404("no such person")
    return person


def tenants_not_administered(*, user: AnyUser, person: User) -> list[str]:
    """Slugs of the person's tenants that ``user`` does not administer: an identity is the
    person's everywhere, so only an admin of all of them (or an operator) may change it."""
    if is_operator(user):
        return []
    mine = set(memberships(user, Role.ADMIN).values_list("tenant_id", flat=True))
    theirs = Membership.objects.filter(user=person).exclude(tenant_id__in=mine)
    return sorted(set(theirs.values_list("tenant__slug", flat=True)))


def cluster_identity_of(user: AnyUser | None) -> ClusterIdentity | None:
    """The submitter's identity (dispatch and submission read it; no scoping: it is theirs)."""
    if user is None or not isinstance(user.pk, int) or not user.pk:
        return None
    return ClusterIdentity.objects.filter(user_id=user.pk).first()


def run_as_problem(*, project, user: AnyUser | None) -> str:
    """Why ``user`` cannot submit to ``project`` as things stand ("" when they can): a
    project whose jobs run as the person needs the person to have a cluster identity."""

    if project.run_as != RunAs.PERSON or cluster_identity_of(user) is not None:
        return ""
    return (
        f"jobs of {project.slug} run as the person who submits them, and "
        f"{getattr(user, 'username', 'you')} has no cluster identity yet; an admin of the tenant sets one."
    )
