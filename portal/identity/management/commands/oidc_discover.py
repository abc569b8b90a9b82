"""`manage.py oidc_discover ISSUER`: the environment lines for an OpenID Connect provider,
read from its discovery document (ISSUER/.well-known/openid-configuration)."""

from __future__ import annotations

import requests
from django.core.management.base import BaseCommand, CommandError, CommandParser

_NAMES = {
    "authorization_endpoint": "GPUBROKER_OIDC_AUTHORIZATION_ENDPOINT",
    "token_endpoint": "GPUBROKER_OIDC_TOKEN_ENDPOINT",
    "userinfo_endpoint": "GPUBROKER_OIDC_USERINFO_ENDPOINT",
    "jwks_uri": "GPUBROKER_OIDC_JWKS_ENDPOINT",
}


class Command(BaseCommand):
    help = "Print the GPUBROKER_OIDC_* endpoint variables from a provider's discovery document."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("issuer")

    def handle(self, *args, issuer: str, **opts) -> None:
        url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            found = requests.get(url, timeout=10)
            found.raise_for_status()
            doc = found.json()
        except (requests.RequestException, ValueError) as exc:
            raise CommandError(f"{url}: {exc}") from None
        missing = [key for key in _NAMES if key not in doc]
        if missing:
            raise CommandError(f"{url} does not name {', '.join(missing)}")
        self.stdout.write(f"GPUBROKER_OIDC_ISSUER={doc.get('issuer', issuer)}")
        for key, name in _NAMES.items():
            self.stdout.write(f"{name}={doc[key]}")
