from django.apps import AppConfig


class PagesConfig(AppConfig):
    name = "portal.pages"
    label = "pages"
