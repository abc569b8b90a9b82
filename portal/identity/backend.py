"""mozilla-django-oidc's backend with our provisioning and a stricter token check.

The library verifies the signature (JWKS) and the nonce; it does not check the audience
and lets an expired token's error escape as a server error.  Here every invalid token
(bad signature, expired, wrong issuer or audience) is refused as a bad request.
"""

from __future__ import annotations

import jwt
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from portal.identity.services.provisioning import IdentityRefused, identity_sign_in


class InstitutionBackend(OIDCAuthenticationBackend):
    def _verify_jws(self, payload, key):
        try:
            header = jwt.get_unverified_header(payload)
        except jwt.InvalidTokenError:
            raise SuspiciousOperation("the ID token is not a JWT") from None
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(
                f"the ID token is signed with {header.get('alg')!r}, not {self.OIDC_RP_SIGN_ALGO}"
            )
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.GPUBROKER_OIDC_ISSUER,
                leeway=30,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as exc:  # signature, expiry, issuer, audience
            raise SuspiciousOperation(f"ID token refused: {exc}") from None

    def get_or_create_user(self, access_token, id_token, payload):
        claims = {**payload, **self.get_userinfo(access_token, id_token, payload)}
        if claims.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo is about another subject than the ID token")
        try:
            return identity_sign_in(issuer=settings.GPUBROKER_OIDC_ISSUER, claims=claims)
        except IdentityRefused as exc:
            raise SuspiciousOperation(str(exc)) from None
