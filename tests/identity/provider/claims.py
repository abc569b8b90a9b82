"""The provider's claims: email and username, and the user's groups under the groups scope."""
from oidc_provider.lib.claims import ScopeClaims


def userinfo(claims, user):
    claims["email"] = user.email
    claims["preferred_username"] = user.username
    return claims


class GroupsScope(ScopeClaims):
    info_groups = ("Groups", "The groups you belong to")

    def scope_groups(self):
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}
