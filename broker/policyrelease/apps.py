from django.apps import AppConfig


class PolicyReleaseConfig(AppConfig):
    name = "broker.policyrelease"
    label = "policyrelease"
    verbose_name = "Policy releases"
