"""A control plane that answers with something its parser cannot read has not answered
usefully: the guard turns such a crash into ``Unavailable``, so the broker marks the
cluster stale and looks jobs up later instead of failing a task with a stray TypeError."""

from __future__ import annotations

import functools
from typing import Any, Iterator

from broker.backends.base import Unavailable

# What a parser raises on a malformed answer; BackendError and BaseException pass through.
MALFORMED = (AttributeError, TypeError, ValueError, KeyError, IndexError, OverflowError)
GUARDED = frozenset({"inventory", "submit", "find", "status", "active_jobs", "cancel", "logs"})


class GuardedBackend:
    def __init__(self, inner: Any):
        self._inner = inner
        self.kind = inner.kind
        self.cluster = inner.cluster

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name in GUARDED:
            return _guard(self.cluster, name, attr)
        if name == "usage":
            return functools.partial(_guarded_usage, self.cluster, attr)
        return attr


def _guard(cluster: str, name: str, method):
    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except MALFORMED as exc:
            raise Unavailable(f"{cluster}: malformed answer to {name}: {type(exc).__name__}: {exc}") from exc

    return call


def _guarded_usage(cluster: str, method, *args, **kwargs) -> Iterator:
    try:
        yield from method(*args, **kwargs)
    except MALFORMED as exc:
        raise Unavailable(f"{cluster}: malformed usage record: {type(exc).__name__}: {exc}") from exc
