"""The type of a JSON value, for what goes into and comes out of the JSON columns.

Read-only containers (``Sequence``, ``Mapping``) so that a ``dict[str, float]`` or a
``list[str]`` is a JSON value as it stands (``dict`` and ``list`` are invariant)."""

from __future__ import annotations

from typing import Mapping, Sequence, TypeAlias

Json: TypeAlias = "str | int | float | bool | None | Sequence[Json] | Mapping[str, Json]"
JsonObject: TypeAlias = "dict[str, Json]"
