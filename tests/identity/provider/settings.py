"""A real OpenID Connect provider (django-oidc-provider from PyPI) for the sign-in tests.

Run by tests/identity/conftest.py as its own process on loopback: discovery, the
authorization code flow with PKCE, RS256 ID tokens and JWKS, userinfo with a groups claim.
"""
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = "provider-of-the-test-suite-only-" + "x" * 20
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions",
                  "oidc_provider"]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware", "django.middleware.common.CommonMiddleware",
              "django.middleware.csrf.CsrfViewMiddleware",
              "django.contrib.auth.middleware.AuthenticationMiddleware"]
ROOT_URLCONF = "tests.identity.provider.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [HERE / "templates"],
              "APP_DIRS": True, "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                                  "django.contrib.auth.context_processors.auth"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
USE_TZ = True
LOGIN_URL = "/accounts/login/"
OIDC_USERINFO = "tests.identity.provider.claims.userinfo"
OIDC_EXTRA_SCOPE_CLAIMS = "tests.identity.provider.claims.GroupsScope"
OIDC_IDTOKEN_EXPIRE = 600
