"""REST API v1: people's cluster identities and whose name a project's jobs carry.

Tenant admins (and operators) only: a wrong role gets 403 whatever the id; a person or
project outside the admin's tenants is 404, as everywhere."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.auth import get_user_model
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.identity.selectors import people_list, person_get, tenants_not_administered
from portal.restapi.strict import StrictSerializer
from portal.identity.services.cluster_identity import (
    cluster_identity_clear,
    cluster_identity_set,
    project_run_as_set,
)
from portal.tenancy.access import object_for, require_role, signed_in
from portal.tenancy.models import Role, RunAs
from portal.tenancy.selectors import project_list


class ClusterIdentityOut(serializers.Serializer):
    user_id = serializers.IntegerField(source="id")
    username = serializers.CharField()
    posix_user = serializers.CharField(source="cluster_identity.posix_user", default="")
    posix_group = serializers.CharField(source="cluster_identity.posix_group", default="")
    k8s_user = serializers.CharField(source="cluster_identity.k8s_user", default="")
    source = serializers.CharField(
        source="cluster_identity.source",
        default="",  # type: ignore[assignment]
        help_text="admin or claim; empty: no cluster identity",
    )

    def to_representation(self, instance):
        # a person without an identity reads as empty fields, not nulls
        return {k: "" if v is None else v for k, v in super().to_representation(instance).items()}


class ClusterIdentityIn(StrictSerializer):
    posix_user = serializers.CharField(max_length=32, help_text="POSIX user name at the Slurm clusters")
    posix_group = serializers.CharField(
        max_length=32,
        required=False,
        allow_blank=True,
        default="",
        help_text="for sbatch --gid; empty: the user's primary group",
    )
    k8s_user = serializers.CharField(
        max_length=253,
        required=False,
        allow_blank=True,
        default="",
        help_text="Kubernetes user to impersonate; empty: none",
    )


class RunAsIn(StrictSerializer):
    run_as = serializers.ChoiceField(choices=RunAs.choices)


class RunAsOut(serializers.Serializer):
    id = serializers.IntegerField()
    slug = serializers.CharField()
    run_as = serializers.CharField()


def _person_to_change(request: Request, user_id: int):
    require_role(request.user, Role.ADMIN)
    person = person_get(user=request.user, person_id=user_id)  # 404 for outsiders
    others = tenants_not_administered(user=request.user, person=person)
    if others:
        raise PermissionDenied(
            f"{person.username} is also in {', '.join(others)}, which you do not administer; "
            "an operator or an admin of every tenant of theirs sets the identity"
        )
    return person


def _fresh(person: User):
    return get_user_model().objects.select_related("cluster_identity").get(id=person.id)


class ClusterIdentityList(ListAPIView):
    """The people of the tenants you administer, with their cluster identity."""

    serializer_class = ClusterIdentityOut
    keyset_ordering = "id"

    def get_queryset(self):
        require_role(self.request.user, Role.ADMIN)
        return people_list(user=self.request.user)


class ClusterIdentityDetail(APIView):
    @extend_schema(responses={200: ClusterIdentityOut})
    def get(self, request: Request, user_id: int) -> Response:
        require_role(request.user, Role.ADMIN)
        return Response(ClusterIdentityOut(person_get(user=request.user, person_id=user_id)).data)

    @extend_schema(request=ClusterIdentityIn, responses={200: ClusterIdentityOut})
    def put(self, request: Request, user_id: int) -> Response:
        person = _person_to_change(request, user_id)
        data = ClusterIdentityIn(data=request.data)
        data.is_valid(raise_exception=True)
        cluster_identity_set(actor=signed_in(request.user), user=person, **data.validated_data)  # IdentityInvalid: 400
        return Response(ClusterIdentityOut(_fresh(person)).data)

    @extend_schema(request=None, responses={200: ClusterIdentityOut})
    def delete(self, request: Request, user_id: int) -> Response:
        person = _person_to_change(request, user_id)
        cluster_identity_clear(actor=signed_in(request.user), user=person)
        return Response(ClusterIdentityOut(_fresh(person)).data)


class ProjectRunAs(APIView):
    @extend_schema(request=RunAsIn, responses={200: RunAsOut})
    def patch(self, request: Request, project_id: int) -> Response:
        admin_of = project_list(user=request.user, roles=(Role.ADMIN,))
        project = object_for(request.user, admin_of, project_id, tenant_field="tenant_id", roles=(Role.ADMIN,))
        data = RunAsIn(data=request.data)
        data.is_valid(raise_exception=True)
        project = project_run_as_set(
            actor=signed_in(request.user), project=project, run_as=data.validated_data["run_as"]
        )
        return Response(RunAsOut(project).data)


# mounted under /api/v1/ by the composition root (config/urls.py)
urlpatterns = [
    path("projects/<int:project_id>/run-as/", ProjectRunAs.as_view(), name="api-project-run-as"),
    path("cluster-identities/", ClusterIdentityList.as_view(), name="api-cluster-identities"),
    path("cluster-identities/<int:user_id>/", ClusterIdentityDetail.as_view(), name="api-cluster-identity"),
]
