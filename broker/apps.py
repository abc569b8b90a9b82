from django.apps import AppConfig


class BrokerConfig(AppConfig):
    name = "broker"
    verbose_name = "GPU broker"
