from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "portal.metrics"
    label = "metrics"
    verbose_name = "Fleet metrics"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # connects the count of task failures (a Celery signal) in every process: a worker,
        # and the web process when tasks run in it (no CELERY_BROKER_URL)
        from portal.metrics import tasks  # noqa: F401
