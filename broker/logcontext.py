"""The ids a log line carries: the request being answered and the workload being acted on.

Two context variables, bound for the length of a ``with`` block (``request_bound``,
``workload_bound``), and one logging filter that copies them onto every record, so that both
log formats (``config.logformat``) can show them.  Context variables rather than a runtime
field (``broker.runtime``) because the ids belong to one request or one task: two requests
answered in two threads each see their own, which a process-wide override would mix up.
Nothing but logging reads them; no decision depends on them.

Plain Python, free of Django and of the rest of the broker, so every floor may bind an id.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("gpubroker_request_id", default=None)
WORKLOAD_ID: contextvars.ContextVar[int | None] = contextvars.ContextVar("gpubroker_workload_id", default=None)


@contextlib.contextmanager
def workload_bound(workload_id: int) -> Iterator[None]:
    """Log lines written inside the block carry ``workload_id``; the id before it is back after."""
    token = WORKLOAD_ID.set(workload_id)
    try:
        yield
    finally:
        WORKLOAD_ID.reset(token)


def request_bind(request_id: str) -> None:
    """The request id for the lines logged until ``request_forget``: unlike a workload's, it
    outlives the middleware's own call, since Django logs a 4xx answer after the middleware
    has returned it (the WSGI server closing the response ends the request)."""
    REQUEST_ID.set(request_id)


def request_forget() -> None:
    REQUEST_ID.set(None)


class LogContextFilter(logging.Filter):
    """Copies the ids bound now onto the record (``request_id``, ``workload_id``: None when
    unknown) and a text rendering of them (``log_ids``: `` [request_id=... workload_id=...]``
    or empty).  Attached to a handler, so it sees the records of every logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id, workload_id = REQUEST_ID.get(), WORKLOAD_ID.get()
        record.request_id = request_id
        record.workload_id = workload_id
        parts = [f"request_id={request_id}"] if request_id else []
        parts += [f"workload_id={workload_id}"] if workload_id is not None else []
        record.log_ids = f" [{' '.join(parts)}]" if parts else ""
        return True
