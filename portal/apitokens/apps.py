from django.apps import AppConfig


class ApiTokensConfig(AppConfig):
    name = "portal.apitokens"
    label = "apitokens"
    verbose_name = "API tokens"

    def ready(self) -> None:
        # drf-spectacular finds the Bearer scheme through this extension's import
        from portal.apitokens import schema  # noqa: F401
