from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """Requests go through the real WSGI handler, which closes the database connection when
    a request ends; inside a test that connection holds the test's transaction.  Django's
    own test client keeps it open the same way."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
