"""Users, groups and the portal's client in the provider's database; the fixture calls
these in a child process with the provider's settings (``Provider.call``)."""
from django.contrib.auth.models import Group, User
from oidc_provider.models import Client, ResponseType


def setup(client_id: str, secret: str, redirect_uri: str) -> None:
    code, _ = ResponseType.objects.get_or_create(value="code", defaults={"description": "code (Authorization Code Flow)"})
    client, _ = Client.objects.get_or_create(client_id=client_id, defaults={
        "name": "gpubroker", "client_type": "confidential", "client_secret": secret, "jwt_alg": "RS256",
        "require_consent": False, "reuse_consent": True})
    client.redirect_uris = [redirect_uri]
    client.scope = ["openid", "email", "profile", "groups"]
    client.save()
    client.response_types.set([code])


def set_groups(username: str, *groups: str) -> None:
    user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@uni.example"})
    if created:
        user.set_password(f"{username}-pw")
        user.save()
    user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])
