"""The OpenAPI security scheme for bearer tokens."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.apitokens.authentication.BearerTokenAuthentication"
    name = "bearerToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "gpb_<secret>",
            "description": "A personal API token, created at /account/tokens/.",
        }
