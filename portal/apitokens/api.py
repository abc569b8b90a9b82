"""The API of API tokens: a signed-in user lists their own tokens, makes one (its secret
shown once) and revokes one.  Thin: shapes here, writes in ``portal.apitokens.services``."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker import runtime
from portal.apitokens.selectors import token_list
from portal.apitokens.services.tokens import token_create, token_revoke
from portal.restapi.strict import StrictSerializer
from portal.tenancy.access import signed_in


class TokenOut(serializers.Serializer):
    id = serializers.IntegerField()
    user = serializers.CharField(source="user.username")
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The secret's first characters")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    state = serializers.SerializerMethodField()

    def get_state(self, token) -> str:
        return token.state(runtime.now())


class TokenIn(StrictSerializer):
    name = serializers.CharField(max_length=100)
    expires_in_days = serializers.IntegerField(min_value=1, max_value=365, default=90)


class TokenCreatedOut(serializers.Serializer):
    id = serializers.IntegerField(source="token.id")
    name = serializers.CharField(source="token.name")
    token = serializers.CharField(source="secret", help_text="The secret: shown this once, never again")
    prefix = serializers.CharField(source="token.prefix")
    expires_at = serializers.DateTimeField(source="token.expires_at")


class TokenListCreate(ListAPIView):
    """The caller's own API tokens (never a secret), and a new one (its secret shown once)."""

    serializer_class = TokenOut

    def get_queryset(self):
        return token_list(user=self.request.user)

    @extend_schema(request=TokenIn, responses={201: TokenCreatedOut})
    def post(self, request: Request) -> Response:
        data = TokenIn(data=request.data)
        data.is_valid(raise_exception=True)
        new = token_create(actor=signed_in(request.user), **data.validated_data)
        return Response(TokenCreatedOut(new).data, status=status.HTTP_201_CREATED)


class TokenRevoke(APIView):
    @extend_schema(request=None, responses={204: OpenApiResponse(description="revoked")})
    def delete(self, request: Request, token_id: int) -> Response:
        token_revoke(actor=signed_in(request.user), token_id=token_id)  # 404 for another user's token
        return Response(status=status.HTTP_204_NO_CONTENT)


# mounted under /api/v1/ by the composition root (config/urls.py)
urlpatterns = [
    path("tokens/", TokenListCreate.as_view(), name="api-tokens"),
    path("tokens/<int:token_id>/", TokenRevoke.as_view(), name="api-token"),
]
