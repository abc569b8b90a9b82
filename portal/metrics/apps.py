from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "portal.metrics"
    label = "metrics"
    verbose_name = "Fleet metrics"
    default_auto_field = "django.db.models.BigAutoField"
