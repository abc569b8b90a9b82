from django.apps import AppConfig


class SecurityConfig(AppConfig):
    name = "portal.security"
    label = "security"
    verbose_name = "Sign-in security"

    def ready(self) -> None:
        from portal.security import signals  # noqa: F401  (connects the sign-in receivers)
