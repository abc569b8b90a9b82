"""Django settings: every value comes from the environment, with working defaults.

With nothing set the portal runs on SQLite in the project folder and executes
background tasks in-process, so a laptop with only Python can run the demo.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import django

from config.env import (
    broker_url,
    database_from_url,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_renamed,
    env_secret,
    env_str,
)
from config.logformat import LOG_FORMATS, logging_config

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("GPUBROKER_DEBUG", False)
SECRET_KEY = env_str("GPUBROKER_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and env_bool("GPUBROKER_REQUIRE_SECRET", False):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("GPUBROKER_SECRET_KEY: must be set in production")
    SECRET_KEY = "insecure-dev-key-set-GPUBROKER_SECRET_KEY"
ALLOWED_HOSTS = env_list("GPUBROKER_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("GPUBROKER_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's static files (SWAGGER_UI_DIST below)
    "django_htmx",
    "portal.tenancy",
    "portal.pages",
    "broker",
    "broker.policyrelease",
    "portal.security",
    "portal.identity",
    "broker.api",
    "portal.apitokens",
    "accounting",
    "portal.metrics",
    "demo",
]
if django.VERSION < (6, 0):
    INSTALLED_APPS.append("template_partials")
# Development tools: the fault harness (manage.py fault_harness) is test tooling in
# broker/faults, which the wheel does not ship; it is an app only when this is on.
GPUBROKER_DEV_TOOLS = env_bool("GPUBROKER_DEV_TOOLS", False)
if GPUBROKER_DEV_TOOLS:
    import importlib.util

    if importlib.util.find_spec("broker.faults") is None:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("GPUBROKER_DEV_TOOLS: the development tools run from a source checkout only")
    INSTALLED_APPS.append("broker.faults")

MIDDLEWARE = [
    # first: every answer, a redirect or a refusal included, carries its X-Request-ID
    "config.requestid.RequestIdMiddleware",
    # a view that met an unreachable database answers 503 with Retry-After, not 500
    "config.dbdown.DatabaseUnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # sign-in and token endpoints: a per-address limit before any work is done
    "portal.security.ratelimit.RateLimitMiddleware",
    # /static/ with debug off (the default) in the demo and under gunicorn alike
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.tenancy.context.roles",
                "portal.pages.nav.navigation",
                "broker.context.background_status",
            ],
        },
    },
]

DATABASES = {"default": database_from_url("DATABASE_URL", BASE_DIR / "db.sqlite3")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several threads (requests, the in-process worker) share the file.  WAL: readers never
    # wait for the writer.  IMMEDIATE: a transaction takes the write lock when it begins, so
    # two of them cannot both read and then fail to upgrade ("database is locked" at once,
    # which no busy timeout retries); the timeout (busy_timeout, in seconds) makes a writer
    # wait its turn, retried by SQLite itself, instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# HTTPS behind a proxy (docker-compose.yml sets it): the proxy terminates TLS and says so in
# X-Forwarded-Proto; cookies go over HTTPS only, browsers are told to stay on HTTPS (HSTS),
# and plain HTTP is redirected, except the health check and /metrics scraped from inside.
GPUBROKER_HTTPS = env_bool("GPUBROKER_HTTPS", False)
if GPUBROKER_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("GPUBROKER_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("GPUBROKER_HSTS_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("GPUBROKER_HSTS_PRELOAD", True)
# The proxies in front (addresses or networks): a request from one of them is counted and audited
# under the address it forwarded for (X-Forwarded-For), not under the proxy's own, which every
# client behind it shares. Empty: REMOTE_ADDR as it is (nothing in front, or a proxy that
# rewrites it). docker-compose.yml trusts the private ranges: only its proxy reaches the web
# processes there.
GPUBROKER_TRUSTED_PROXIES = env_networks("GPUBROKER_TRUSTED_PROXIES", [])
# attempts per minute and client address at /login/, the OpenID Connect endpoints and token creation
GPUBROKER_SIGNIN_RATE_PER_MINUTE = env_int("GPUBROKER_SIGNIN_RATE_PER_MINUTE", 10, minimum=1)
# the rate limiter's counters: shared by all web processes through Redis when one is given
_CACHE_URL = env_str("GPUBROKER_CACHE_URL", "")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _CACHE_URL}
    if _CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# Quota alerts to their owners.  The demo prints mails on the console; a site sets SMTP
# (django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST...); tests use locmem.
EMAIL_BACKEND = env_str("GPUBROKER_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("GPUBROKER_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("GPUBROKER_EMAIL_PORT", 25, minimum=1)
DEFAULT_FROM_EMAIL = env_str("GPUBROKER_EMAIL_FROM", "gpubroker@localhost")

# Sign-in through the institution (OpenID Connect, mozilla-django-oidc): on when an issuer is
# set.  `manage.py oidc_discover ISSUER` prints the endpoint variables from its discovery.
GPUBROKER_OIDC_ISSUER = env_str("GPUBROKER_OIDC_ISSUER", "")
OIDC_RP_CLIENT_ID = env_str("GPUBROKER_OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("GPUBROKER_OIDC_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("GPUBROKER_OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("GPUBROKER_OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("GPUBROKER_OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("GPUBROKER_OIDC_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_RP_SCOPES = env_str("GPUBROKER_OIDC_SCOPES", "openid email profile groups")
# a claim carrying the person's POSIX user name (e.g. "uid"): their cluster identity, unless
# an admin set one by hand; empty: identities are set by admins only
GPUBROKER_OIDC_POSIX_CLAIM = env_str("GPUBROKER_OIDC_POSIX_CLAIM", "")
OIDC_TIMEOUT = 10
LOGIN_REDIRECT_URL_FAILURE = "/login/?failed=oidc"
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]  # local accounts always stay
if GPUBROKER_OIDC_ISSUER:
    AUTHENTICATION_BACKENDS.append("portal.identity.backend.InstitutionBackend")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# WhiteNoise also serves straight from the finders (static/ and the apps' static folders),
# so a fresh clone needs no collectstatic; gunicorn in docker-compose still collects first.
WHITENOISE_USE_FINDERS = True
# ...and without a collectstatic there is no STATIC_ROOT yet: that is expected, not worth a warning
warnings.filterwarnings("ignore", message="No directory at: .*staticfiles", category=UserWarning)

REST_FRAMEWORK = {
    # Bearer first: an anonymous call is then told (401, WWW-Authenticate) how to authenticate
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.apitokens.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "portal.restapi.pagination.KeysetPagination",
    "EXCEPTION_HANDLER": "portal.restapi.errors.api_exception_handler",
    # JSON bodies only: the input serializers check JSON types ("8" is not 8), forms would be all text
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU broker API",
    "DESCRIPTION": "Submit and follow GPU workloads across Slurm, Kueue, Volcano and cloud.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # /api/v1/docs/ loads Swagger UI from our own static files, never from a CDN
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.restapi.schema.add_error_responses",
    ],
}

# Celery: with no broker URL, tasks run eagerly in the calling process (demo, laptop).
CELERY_BROKER_URL = broker_url("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
# every task goes to this queue (Celery's default name, spelled out: /metrics reports its depth)
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("GPUBROKER_TASK_TIME_LIMIT_S", 120, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = max(1, CELERY_TASK_TIME_LIMIT - 10)
# a usage read can be long (a month of sacct on a big cluster): the accounting tasks get more
GPUBROKER_USAGE_TASK_TIME_LIMIT_S = env_int("GPUBROKER_USAGE_TASK_TIME_LIMIT_S", 1800, minimum=1)
GPUBROKER_USAGE_TASK_SOFT_TIME_LIMIT_S = max(1, GPUBROKER_USAGE_TASK_TIME_LIMIT_S - 20)
CELERY_RESULT_BACKEND = None
CELERY_TIMEZONE = "UTC"

# Broker behaviour.
GPUBROKER_POLICY_FILE = Path(env_str("GPUBROKER_POLICY_FILE", str(BASE_DIR / "broker" / "policy" / "default.yaml")))
GPUBROKER_FLEET_FILE = Path(env_str("GPUBROKER_FLEET_FILE", str(BASE_DIR / "broker" / "fleets" / "demo.yaml")))
GPUBROKER_ENABLE_SIMULATOR = env_bool("GPUBROKER_ENABLE_SIMULATOR", True)
GPUBROKER_ENABLE_SLURM = env_bool("GPUBROKER_ENABLE_SLURM", False)
GPUBROKER_ENABLE_KUEUE = env_bool("GPUBROKER_ENABLE_KUEUE", False)
GPUBROKER_ENABLE_VOLCANO = env_bool("GPUBROKER_ENABLE_VOLCANO", False)
GPUBROKER_BACKEND_TIMEOUT_S = env_float("GPUBROKER_BACKEND_TIMEOUT_S", 20.0, minimum=0.1)
GPUBROKER_INVENTORY_INTERVAL_S = env_int("GPUBROKER_INVENTORY_INTERVAL_S", 30, minimum=1)
GPUBROKER_STATUS_INTERVAL_S = env_int("GPUBROKER_STATUS_INTERVAL_S", 10, minimum=1)
GPUBROKER_RECONCILE_INTERVAL_S = env_int("GPUBROKER_RECONCILE_INTERVAL_S", 60, minimum=1)
# one reconcile pass stops early (and records what it left) well inside the task's time limit,
# and enqueues at most this many dispatch and cancel follow-ups; the next pass takes the rest
GPUBROKER_RECONCILE_BUDGET_S = env_int("GPUBROKER_RECONCILE_BUDGET_S", max(1, CELERY_TASK_TIME_LIMIT // 2), minimum=1)
GPUBROKER_RECONCILE_MAX_FOLLOW_UPS = env_int("GPUBROKER_RECONCILE_MAX_FOLLOW_UPS", 200, minimum=1)
GPUBROKER_MK_DISPATCH_INTERVAL_S = env_int("GPUBROKER_MK_DISPATCH_INTERVAL_S", 10, minimum=1)
GPUBROKER_USAGE_INTERVAL_S = env_int("GPUBROKER_USAGE_INTERVAL_S", 900, minimum=1)
GPUBROKER_ACCOUNTING_TOLERANCE = env_float("GPUBROKER_ACCOUNTING_TOLERANCE", 0.02)
# The simulated fleet's clock runs this many times faster than wall time (the demo, and a
# process that loads the fleet file itself: GPUBROKER_SIM_AUTOLOAD, e.g. a Celery worker).
env_renamed("BROKER_SIM_TIME_SCALE", "GPUBROKER_SIM_TIME_SCALE")
env_renamed("BROKER_SIM_FLEET", "GPUBROKER_SIM_AUTOLOAD=true (the fleet is GPUBROKER_FLEET_FILE)")
GPUBROKER_SIM_TIME_SCALE = env_float("GPUBROKER_SIM_TIME_SCALE", 120.0, minimum=1.0)
GPUBROKER_SIM_AUTOLOAD = env_bool("GPUBROKER_SIM_AUTOLOAD", False)
# /metrics: a Bearer token, or a client address in the allow-list (REMOTE_ADDR).
GPUBROKER_METRICS_TOKEN = env_secret("GPUBROKER_METRICS_TOKEN", min_length=16)
GPUBROKER_METRICS_ALLOW = env_networks("GPUBROKER_METRICS_ALLOW", ["127.0.0.1", "::1"])
# Fleet figures sampled for the charts, and how long the samples are kept.
GPUBROKER_SAMPLE_INTERVAL_S = env_int("GPUBROKER_SAMPLE_INTERVAL_S", 300, minimum=1)
# how long a node whose GPUs failed a job's pre-flight check takes no job (an admin may clear
# it sooner by resolving its escalation); a later failure there starts the block again
GPUBROKER_GPU_CHECK_BLOCK_S = env_int("GPUBROKER_GPU_CHECK_BLOCK_S", 86_400, minimum=60)
GPUBROKER_SAMPLE_KEEP_DAYS = env_int("GPUBROKER_SAMPLE_KEEP_DAYS", 400, minimum=1)
# Notifications: the wait after which a "long wait" is told, unless a user chose another time;
# webhooks to loopback are refused (request forgery) unless allowed here, for the tests or a
# demo with a receiver on the same machine.  Private and link-local addresses never are.
GPUBROKER_NOTIFY_LONG_WAIT_MINUTES = env_int("GPUBROKER_NOTIFY_LONG_WAIT_MINUTES", 60, minimum=1)
GPUBROKER_WEBHOOK_ALLOW_LOOPBACK = env_bool("GPUBROKER_WEBHOOK_ALLOW_LOOPBACK", False)

# Logs: text for a console, or one JSON object per line for a log pipeline; both carry the
# request id (X-Request-ID) and the workload a task acts on (config/logformat.py).  Celery's
# worker logs through the same handler (config/celery.py).
GPUBROKER_LOG_FORMAT = env_choice("GPUBROKER_LOG_FORMAT", "text", LOG_FORMATS)
LOGGING = logging_config(GPUBROKER_LOG_FORMAT, env_str("GPUBROKER_LOG_LEVEL", "INFO"))

# The one schedule of periodic work: Celery beat runs it, and so does the in-process ticker
# (broker/inprocess.py) when there is no Celery broker.  Intervals in seconds only.
# One beat schedules at a time (config/beat.py): the lease it renews on every tick runs out
# this long after its holder stops, and another beat takes over.
GPUBROKER_BEAT_LEASE_S = env_int("GPUBROKER_BEAT_LEASE_S", 30, minimum=5)
CELERY_BEAT_SCHEDULER = "config.beat:SingleBeatScheduler"
CELERY_BEAT_SCHEDULE = {
    "inventory": {"task": "broker.tasks.sync_all_inventory", "schedule": float(GPUBROKER_INVENTORY_INTERVAL_S)},
    "status": {"task": "broker.tasks.poll_all_status", "schedule": float(GPUBROKER_STATUS_INTERVAL_S)},
    "place-waiting": {"task": "broker.tasks.place_waiting", "schedule": float(GPUBROKER_STATUS_INTERVAL_S)},
    # jobs a destination holds by local policy past the policy's limit move elsewhere
    "withdraw-policy-holds": {"task": "broker.tasks.withdraw_policy_holds", "schedule": 60.0},
    # after each inventory report: a job queued at one cluster that another could start now moves
    "move-queued": {"task": "broker.tasks.move_queued", "schedule": float(GPUBROKER_INVENTORY_INTERVAL_S)},
    "broker-preempt": {"task": "broker.tasks.preempt_for_waiting", "schedule": float(GPUBROKER_INVENTORY_INTERVAL_S)},
    "reconcile": {"task": "broker.tasks.reconcile", "schedule": float(GPUBROKER_RECONCILE_INTERVAL_S)},
    "multikueue-dispatch": {
        "task": "broker.tasks.multikueue_dispatch_all",
        "schedule": float(GPUBROKER_MK_DISPATCH_INTERVAL_S),
    },
    "collect-usage": {"task": "accounting.tasks.collect_all_usage", "schedule": float(GPUBROKER_USAGE_INTERVAL_S)},
    # after usage comes in: cloud spend against on-prem TCO per tenant (the cloud-burst warning)
    "cloud-tco": {"task": "accounting.tasks.check_cloud_tco", "schedule": float(GPUBROKER_USAGE_INTERVAL_S)},
    "budget-check": {"task": "accounting.tasks.check_budgets", "schedule": float(GPUBROKER_USAGE_INTERVAL_S)},
    "sample-fleet": {"task": "portal.metrics.tasks.sample_fleet", "schedule": float(GPUBROKER_SAMPLE_INTERVAL_S)},
    # approved quota raises past their end date go back; hourly is soon enough for a whole-day end
    "end-quota-requests": {"task": "broker.tasks.end_quota_requests", "schedule": 3600.0},
    "notify-long-waits": {"task": "broker.tasks.notify_long_waits", "schedule": 60.0},
}
