"""The Celery app; configuration comes from Django settings (CELERY_* names)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("gpubroker")
app.config_from_object("django.conf:settings", namespace="CELERY")
if app.conf.task_always_eager and not app.conf.broker_url:
    # in-process tasks: Celery still takes a producer from its pool to serialise an eager
    # task's arguments, and with no broker URL that pool is of a default localhost AMQP broker
    # (kombu warned "No hostname was supplied" at the demo's first pass); the in-memory
    # transport is what in-process means (named with a host, or kombu warns all the same)
    app.conf.broker_url = "memory://localhost/"
app.autodiscover_tasks()


@setup_logging.connect
def keep_the_settings_logging(**_: object) -> None:
    """A worker logs as the web process does (the settings' LOGGING: GPUBROKER_LOG_FORMAT and
    GPUBROKER_LOG_LEVEL, the ids on each line): with a receiver here, Celery leaves the logging
    that django.setup() configured in place instead of installing its own format."""
