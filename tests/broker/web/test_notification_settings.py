"""The notification settings page: each user's own choices, secret and sent messages."""
from __future__ import annotations

from django.urls import reverse

from broker.models import Notification, NotificationPreference


def test_user_saves_events_and_channels_and_sees_the_secret(trio, login):
    client = login(trio.member)
    response = client.post(reverse("notification-settings"), {
        "events": ["started", "failed"], "long_wait_minutes": 45, "email": "on",
        "webhook_url": "https://hooks.example.org/gpu"})
    assert response.status_code == 302
    pref = NotificationPreference.objects.get(user=trio.member)
    assert (pref.events, pref.long_wait_minutes, pref.email, pref.webhook_url) == (
        ["failed", "started"], 45, True, "https://hooks.example.org/gpu")
    assert pref.webhook_secret in client.get(reverse("notification-settings")).content.decode()


def test_rotating_the_secret_makes_a_new_one(trio, login):
    client = login(trio.member)
    client.post(reverse("notification-settings"), {"long_wait_minutes": 60})
    old = NotificationPreference.objects.get(user=trio.member).webhook_secret
    assert client.post(reverse("notification-settings"), {"rotate": "1"}).status_code == 302
    assert NotificationPreference.objects.get(user=trio.member).webhook_secret != old


def test_bad_webhook_url_and_unknown_event_are_named(trio, login):
    response = login(trio.member).post(reverse("notification-settings"), {
        "events": ["exploded"], "long_wait_minutes": 0, "webhook_url": "not a url"})
    body = response.content.decode()
    assert response.status_code == 400
    assert all(f'data-field="{f}"' in body for f in ("events", "long_wait_minutes", "webhook_url"))
    assert not NotificationPreference.objects.exists()


def test_page_lists_only_the_users_own_notifications(trio, quota, submit, login):
    workload = submit()
    Notification.objects.create(user=trio.member, workload=workload, event="started", channel="email",
                                target="member@example.org", body="{}")
    assert workload.name in login(trio.member).get(reverse("notification-settings")).content.decode()
    outsider_page = login(trio.outsider).get(reverse("notification-settings")).content.decode()
    assert "member@example.org" not in outsider_page and workload.uid not in outsider_page
    assert "Nothing sent yet" in outsider_page


def test_an_internal_or_non_http_webhook_url_is_refused_naming_the_field(trio, login):
    client = login(trio.member)
    for url, words in (("http://10.0.0.7/hook", "private address"), ("ftp://hooks.example.org/x", "http://")):
        response = client.post(reverse("notification-settings"), {"long_wait_minutes": 60, "webhook_url": url})
        body = response.content.decode()
        assert response.status_code == 400 and 'data-field="webhook_url"' in body and words in body
    assert not NotificationPreference.objects.exists()


def test_the_form_starts_from_the_configured_long_wait(trio, login, settings):
    settings.GPUBROKER_NOTIFY_LONG_WAIT_MINUTES = 45
    body = login(trio.member).get(reverse("notification-settings")).content.decode()
    assert 'name="long_wait_minutes" value="45"' in body
