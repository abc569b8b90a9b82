"""The composition root: settings, URLs, the Celery app and WSGI."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
