"""Webhook URL safety: only public http(s) addresses, checked when saved and again as each
delivery connects; loopback only where the setting allows it (tests, a local demo)."""
from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from broker.models import Notification, NotificationPreference
from broker.services.notifying.deliveries import PreferenceRefused, notifications_send, preference_set
from broker.services.submitting.webhook_guard import UnsafeWebhookUrl, vetted_address, webhook_url_check


@pytest.mark.parametrize("url, words", [
    ("ftp://hooks.example.org/x", "http:// or https://"),
    ("file:///etc/passwd", "http:// or https://"),
    ("gopher://127.0.0.1:6379/_INFO", "http:// or https://"),
    ("https:///no-host", "names no host"),
    ("http://127.0.0.1:8000/hook", "loopback"),
    ("http://[::1]/hook", "loopback"),
    ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    ("http://localhost/hook", "resolves to"),
    ("http://10.1.2.3/hook", "private"),
    ("http://192.168.0.10/hook", "private"),
    ("http://172.16.5.4/hook", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://0.0.0.0/hook", "unspecified"),
    ("http://100.64.0.1/hook", "non-public"),
])
def test_unsafe_webhook_urls_are_refused_at_save(url, words):
    with pytest.raises(UnsafeWebhookUrl) as refused:
        webhook_url_check(url)
    assert words in str(refused.value) and refused.value.field == "webhook_url"


def test_a_public_address_and_a_name_that_does_not_resolve_yet_are_accepted():
    webhook_url_check("https://8.8.8.8/hook")
    webhook_url_check("https://hooks.example.invalid/gpu")  # checked again at each delivery
    assert vetted_address("8.8.8.8", 443) == "8.8.8.8"


def test_loopback_is_allowed_only_with_the_setting_and_private_never(settings):
    settings.GPUBROKER_WEBHOOK_ALLOW_LOOPBACK = True
    webhook_url_check("http://127.0.0.1:8000/hook")
    webhook_url_check("http://localhost/hook")
    with pytest.raises(UnsafeWebhookUrl):
        webhook_url_check("http://10.0.0.1/hook")
    with pytest.raises(UnsafeWebhookUrl):
        webhook_url_check("http://169.254.169.254/")


def test_saving_an_internal_webhook_url_is_refused_naming_the_field(trio):
    with pytest.raises(PreferenceRefused) as refused:
        preference_set(user=trio.member, events=["started"], long_wait_minutes=60, email=False,
                       webhook_url="http://169.254.169.254/latest/meta-data/")
    assert refused.value.field == "webhook_url" and "link-local" in str(refused.value)
    assert not NotificationPreference.objects.exists()


class _Counter:
    """A receiver on loopback that counts what reaches it."""

    def __init__(self):
        self.hits = 0
        counter = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # http.server calls it by this name
                counter.hits += 1
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def counter():
    made = _Counter()
    yield made
    made.close()


def test_delivery_checks_again_and_sends_nothing_to_an_address_refused_since(
        trio, quota, submit, settings, counter, django_capture_on_commit_callbacks):
    """Saved while loopback was allowed (or a name that resolved elsewhere then): the delivery
    resolves it again, connects to nothing and is not retried."""
    settings.GPUBROKER_WEBHOOK_ALLOW_LOOPBACK = True
    preference_set(user=trio.member, events=["started"], long_wait_minutes=60, email=False,
                   webhook_url=f"http://localhost:{counter.port}/hook")
    settings.GPUBROKER_WEBHOOK_ALLOW_LOOPBACK = False
    with django_capture_on_commit_callbacks(execute=True):
        notifications_send(workload_id=submit().id, event="started")
    note = Notification.objects.get()
    assert counter.hits == 0
    assert (note.state, note.attempts, note.last_status) == ("failed", 1, None)
    assert note.last_error.startswith("refused: the URL localhost resolves to") and "loopback" in note.last_error


def test_delivery_connects_to_the_address_it_vetted(trio, quota, submit, settings, counter,
                                                   django_capture_on_commit_callbacks):
    settings.GPUBROKER_WEBHOOK_ALLOW_LOOPBACK = True
    preference_set(user=trio.member, events=["started"], long_wait_minutes=60, email=False,
                   webhook_url=f"http://localhost:{counter.port}/hook")
    with django_capture_on_commit_callbacks(execute=True):
        notifications_send(workload_id=submit().id, event="started")
    assert counter.hits == 1 and Notification.objects.get().state == "delivered"
    assert socket.gethostbyname("localhost").startswith("127.")
