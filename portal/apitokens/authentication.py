"""DRF authentication by ``Authorization: Bearer gpb_<secret>``."""

from __future__ import annotations

from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from portal.apitokens.models import TOKEN_PREFIX
from portal.apitokens.selectors import token_by_secret
from portal.apitokens.services.tokens import hash_secret, token_touch

KEYWORD = b"bearer"


class BearerTokenAuthentication(BaseAuthentication):
    """A request that presents a bearer token is decided by it alone: an unknown, expired
    or revoked token is a 401, never a fall-back to the session."""

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD:
            return None
        if len(parts) != 2:
            raise AuthenticationFailed("Authorization: Bearer needs exactly one token.")
        try:
            secret = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed("The token is not valid.") from None
        if not secret.startswith(TOKEN_PREFIX):
            raise AuthenticationFailed("The token is not valid.")
        token = token_by_secret(token_hash=hash_secret(secret))
        if token is None:
            raise AuthenticationFailed("The token is not valid.")
        state = token.state(timezone.now())
        if state != "active":
            raise AuthenticationFailed(f"The token is {state}.", code=f"token_{state}")
        if not token.user.is_active:
            raise AuthenticationFailed("The token's user is inactive.")
        token_touch(token=token)
        return token.user, token

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'
