"""Glue only: Django's sign-in signals -> the audit service."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from portal.security.services.signin import signin_failed, signin_succeeded


@receiver(user_logged_in, dispatch_uid="security.signin_succeeded")
def _logged_in(sender, request, user: User, **kwargs) -> None:
    signin_succeeded(user=user, request=request)


@receiver(user_login_failed, dispatch_uid="security.signin_failed")
def _login_failed(sender, credentials, request=None, **kwargs) -> None:
    signin_failed(username=str(credentials.get("username", ""))[:150], request=request)
