from django.apps import AppConfig


class BrokerApiConfig(AppConfig):
    name = "broker.api"
    label = "broker_api"
    verbose_name = "REST API"
