"""Timestamp fields that read the broker's clock (``broker.runtime``) instead of Django's.

``auto_now`` and ``auto_now_add`` call ``django.utils.timezone.now`` inside Django, which a
run in simulated time (the replay, the fault harness) cannot reach without swapping that
function for the whole process.  These read ``runtime.now()``, so every broker row is stamped
by the same clock as the services that write it.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from broker import runtime


def created_at_field(**kwargs: Any) -> models.DateTimeField:
    """Set once, when the row is made (as ``auto_now_add``, but a given value is kept)."""
    return models.DateTimeField(default=runtime.now, editable=False, blank=True, **kwargs)


class TouchedAtField(models.DateTimeField):
    """Set on every save that writes it, as ``auto_now``: the time of the last change."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("editable", False)
        kwargs.setdefault("blank", True)
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = runtime.now()
        setattr(model_instance, self.attname, value)
        return value
