from django.apps import AppConfig


class IdentityConfig(AppConfig):
    name = "portal.identity"
    label = "identity"
    verbose_name = "Sign-in through the institution"
