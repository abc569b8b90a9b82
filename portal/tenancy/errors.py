"""The one base of every error the product tells a user about (a spec that does not validate,
a quota below its use, a decision that may not be taken).

Each error declares its meaning on its class: the HTTP status it is, the stable machine
``code`` the API answers with, and the form ``field`` it concerns.  The API's exception
handler and the pages read these attributes and nothing else, so a new error needs no entry
in any table and no view names an error class.

This module is on the ground floor: it imports nothing of the product (and nothing of
Django), so plain-data modules such as ``broker.spec`` may raise its subclasses."""

from __future__ import annotations

from collections.abc import Sequence


class DomainError(Exception):
    """An error the user caused or may fix, not a bug.

    ``status``/``code``: what the API answers (a 400 is always code ``invalid``, with its
    fields); ``field``: the form field the message belongs to ("" for the form as a whole).
    A subclass sets them on the class; one that decides per instance (a 409 that is a 403 for
    the approver) sets them on the instance."""

    status: int = 400
    code: str = "invalid"
    field: str = ""
    # Located problems (each with its line, column or field and message) for a page that
    # lists them one by one; empty when the message says all there is.
    details: Sequence[object] = ()

    def field_messages(self) -> dict[str, list[str]]:
        """Field -> messages; empty when the error names no field.  An error that names
        several fields (a spec, a log query) overrides this."""
        return {self.field: [str(self)]} if self.field else {}
