"""REST API: GET/PATCH /api/v1/notifications/preferences/ reads and changes only the caller's
own choices; strict input (an unknown field or a bad value is a 400 naming it); webhook URLs
only to public http(s) addresses."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from broker.models import AuditRecord, NotificationPreference

URL = reverse("api-notification-preferences")


def test_before_any_choice_the_defaults_are_shown_and_nothing_is_stored(trio, api, settings):
    settings.GPUBROKER_NOTIFY_LONG_WAIT_MINUTES = 90
    body = api(trio.member).get(URL).json()
    assert (body["events"], body["long_wait_minutes"], body["email"], body["webhook_url"]) == ([], 90, False, "")
    assert body["webhook_secret"] == "" and body["signature_header"] == "X-GPUBroker-Signature"
    assert not NotificationPreference.objects.exists()


def test_patch_changes_only_the_given_choices_and_is_audited(trio, api):
    client = api(trio.member)
    first = client.patch(URL, {"events": ["started", "failed"], "email": True})
    assert first.status_code == 200, first.content
    second = client.patch(URL, {"webhook_url": "https://hooks.example.org/gpu", "long_wait_minutes": 30})
    body = second.json()
    assert (body["events"], body["email"], body["webhook_url"], body["long_wait_minutes"]) == (
        ["failed", "started"], True, "https://hooks.example.org/gpu", 30)
    pref = NotificationPreference.objects.get(user=trio.member)
    assert body["webhook_secret"] == pref.webhook_secret and len(pref.webhook_secret) > 30
    assert client.get(URL).json() == body
    assert AuditRecord.objects.filter(action="notifications.preferences_set", actor=trio.member).count() == 2


@pytest.mark.parametrize("change, field, words", [
    ({"event": ["started"]}, "event", "Unknown field. Did you mean 'events'?"),
    ({"channels": ["email"]}, "channels", "Unknown field."),
    ({"events": ["exploded"]}, "events.0", "not a valid choice"),
    ({"events": "started"}, "events", "a list"),
    ({"long_wait_minutes": 0}, "long_wait_minutes", ""),
    ({"long_wait_minutes": "60"}, "long_wait_minutes", "a whole number"),
    ({"email": "yes"}, "email", "true or false"),
    ({"webhook_url": "ftp://hooks.example.org/x"}, "webhook_url", "http:// or https://"),
    ({"webhook_url": "http://127.0.0.1:6379/"}, "webhook_url", "loopback"),
    ({"webhook_url": "http://10.0.0.7/hook"}, "webhook_url", "private address"),
    ({"webhook_url": "http://169.254.169.254/latest/meta-data/"}, "webhook_url", "link-local"),
    ({"webhook_url": 7}, "webhook_url", "text"),
])
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(trio, api, change, field, words):
    response = api(trio.member).patch(URL, change)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"]
    assert words in " ".join(error["fields"][field])
    assert not NotificationPreference.objects.exists()


def test_an_unknown_field_gets_the_same_400_as_in_a_submission(trio, quota, api):
    client = api(trio.member)
    preferences = client.patch(URL, {"colour": "blue"})
    submission = client.post(reverse("api-workloads"), {"project": trio.project.id, "colour": "blue"})
    assert preferences.status_code == submission.status_code == 400
    assert preferences.json()["error"]["code"] == submission.json()["error"]["code"] == "invalid"
    assert preferences.json()["error"]["fields"]["colour"] == submission.json()["error"]["fields"]["colour"] == [
        "Unknown field."]


def test_each_user_reads_and_changes_only_their_own(trio, api):
    api(trio.member).patch(URL, {"events": ["started"], "webhook_url": "https://hooks.example.org/member"})
    outsider = api(trio.outsider)
    seen = outsider.get(URL).json()
    assert seen["webhook_url"] == "" and seen["events"] == [] and seen["webhook_secret"] == ""
    assert outsider.patch(URL, {"events": ["failed"]}).json()["events"] == ["failed"]
    member = NotificationPreference.objects.get(user=trio.member)
    assert member.events == ["started"] and member.webhook_url == "https://hooks.example.org/member"


def test_without_credentials_it_is_401():
    assert Client().get(URL).status_code == 401
