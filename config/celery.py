"""The Celery app; configuration comes from Django settings (CELERY_* names)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("gpubroker")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def keep_the_settings_logging(**_: object) -> None:
    """A worker logs as the web process does (the settings' LOGGING: GPUBROKER_LOG_FORMAT and
    GPUBROKER_LOG_LEVEL, the ids on each line): with a receiver here, Celery leaves the logging
    that django.setup() configured in place instead of installing its own format."""
