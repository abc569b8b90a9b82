"""Decoded JSON (Slurm's REST answers, Kubernetes objects) read field by field, each type checked.

An API server may answer with a field of the wrong type: null where an object belongs, a
number where a list belongs.  Reading through ``Fields`` turns that into ``BadField``, a
ValueError naming the field (``status.conditions[0].type``), instead of an AttributeError
from deep inside a parser; the backend guard (guard.py) reports it as ``Unavailable`` with
that text, so the cluster is marked stale and says why.  Missing and null read as empty.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

Key = str | int
_WHOLE_RE = re.compile(r"^-?[0-9]+$")


class BadField(ValueError):
    """A field of a decoded answer is not of the type its reader needs."""

    def __init__(self, path: Sequence[Key], expected: str, got: Any):
        self.field = where(path)
        super().__init__(f"field {self.field}: expected {expected}, got {_shown(got)}")


def where(path: Sequence[Key]) -> str:
    """``("status", "conditions", 0, "type")`` -> ``status.conditions[0].type``."""
    out = ""
    for key in path:
        if isinstance(key, int):
            out += f"[{key}]"
        elif "." in key or "/" in key:  # label and resource names: nvidia.com/gpu
            out += f"[{key!r}]"
        else:
            out += f".{key}" if out else key
    return out or "(the object)"


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


class Fields:
    """One JSON object and where it sits in the answer."""

    __slots__ = ("raw", "path")

    def __init__(self, raw: Any, path: tuple[Key, ...] = ()):
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise BadField(path, "an object", raw)
        self.raw: Mapping[str, Any] = raw
        self.path = path

    def __bool__(self) -> bool:
        return bool(self.raw)

    def at(self, key: str) -> tuple[Key, ...]:
        return self.path + (key,)

    def value(self, key: str) -> Any:
        """The raw value, for readers that take any type (Slurm's ``number``/``clean``)."""
        return self.raw.get(key)

    def obj(self, *keys: str) -> Fields:
        """The object under ``keys``."""
        node = self
        for key in keys:
            node = Fields(node.raw.get(key), node.at(key))
        return node

    def objs(self, key: str) -> list[Fields]:
        """The list of objects under ``key``; a null in it is no object (unlike a null field)."""
        path = self.at(key)
        out = []
        for i, item in enumerate(self.array(key)):
            if item is None:
                raise BadField(path + (i,), "an object", item)
            out.append(Fields(item, path + (i,)))
        return out

    def array(self, key: str) -> list[Any]:
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise BadField(self.at(key), "a list", value)
        return value

    def text(self, key: str, default: str = "") -> str:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise BadField(self.at(key), "text", value)
        return value

    def texts(self, key: str) -> dict[str, str]:
        """An object of text values (labels, annotations, node selectors)."""
        node = self.obj(key)
        return {name: node.text(name) for name in node.raw}

    def strings(self, key: str) -> list[str]:
        """A list of text."""
        path = self.at(key)
        out = []
        for i, item in enumerate(self.array(key)):
            if not isinstance(item, str):
                raise BadField(path + (i,), "text", item)
            out.append(item)
        return out

    def whole(self, key: str, default: int = 0) -> int:
        """A whole number, or text of one."""
        value = self.raw.get(key)
        if value is None:
            return default
        return whole_number(value, self.at(key))

    def flag(self, key: str) -> bool:
        value = self.raw.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise BadField(self.at(key), "true or false", value)
        return value


def whole_number(value: Any, path: Sequence[Key]) -> int:
    if isinstance(value, bool):
        raise BadField(path, "a whole number", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _WHOLE_RE.match(value.strip()):
        return int(value)
    raise BadField(path, "a whole number", value)
