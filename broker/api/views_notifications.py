"""REST API v1: the caller's own notification preferences.  Thin: the service decides."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.restapi.strict import StrictSerializer
from broker.models import NotificationPreference
from broker.models.notification import EVENTS
from broker.selectors.notifications import notification_preference_get
from broker.services.notifying.deliveries import (
    LONG_WAIT_MAX_MINUTES,
    SIGNATURE_HEADER,
    preference_update,
)
from portal.tenancy.access import signed_in


class PreferencesIn(StrictSerializer):
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENTS),
        required=False,
        help_text=f"Which events to be told of: any of {', '.join(EVENTS)}",
    )
    long_wait_minutes = serializers.IntegerField(
        min_value=1,
        max_value=LONG_WAIT_MAX_MINUTES,
        required=False,
        help_text="A wait longer than this is a long_wait event",
    )
    email = serializers.BooleanField(required=False, help_text="Send to the account's e-mail address")
    webhook_url = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text="A public http(s) URL; empty for no webhook"
    )


class PreferencesOut(serializers.ModelSerializer):
    webhook_secret = serializers.CharField(help_text="Signs each webhook body; empty until first saved")
    signature_header = serializers.SerializerMethodField(help_text="Carries sha256=<HMAC-SHA256 hex of the body>")
    # a plain string: empty means no webhook, which a "uri" format would call invalid
    webhook_url = serializers.CharField(read_only=True, help_text="The webhook's URL; empty: no webhook")
    updated_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="null until the caller first saves a choice"
    )

    class Meta:
        model = NotificationPreference
        fields = [
            "events",
            "long_wait_minutes",
            "email",
            "webhook_url",
            "webhook_secret",
            "signature_header",
            "updated_at",
        ]
        read_only_fields = fields

    def get_signature_header(self, _pref: NotificationPreference) -> str:
        return SIGNATURE_HEADER


class NotificationPreferences(APIView):
    """Which events of the caller's own workloads are told, and on which channels."""

    @extend_schema(responses={200: PreferencesOut})
    def get(self, request: Request) -> Response:
        return Response(PreferencesOut(notification_preference_get(user=signed_in(request.user))).data)

    @extend_schema(request=PreferencesIn, responses={200: PreferencesOut})
    def patch(self, request: Request) -> Response:
        data = PreferencesIn(data=request.data)
        data.is_valid(raise_exception=True)
        if not data.validated_data:
            return self.get(request)
        pref = preference_update(user=signed_in(request.user), **data.validated_data)  # PreferenceRefused: 400
        return Response(PreferencesOut(pref).data)
