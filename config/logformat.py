"""The two log formats (GPUBROKER_LOG_FORMAT): text for a console, JSON for a log pipeline.

Both show the request and workload ids that ``broker.logcontext.LogContextFilter`` puts on
each record.  Standard library only (and the plain-Python ``broker.logcontext``): the settings build
``LOGGING`` from here before Django is set up.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

from broker.logcontext import LogContextFilter

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(log_ids)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, the ids when
    known, and the traceback as text (``exception``) when there is one.  JSON escapes the
    newlines of a message or a traceback, so one record never spans two lines."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("request_id", "workload_id"):
            value = getattr(record, key, None)
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # default=str: an argument that JSON cannot encode is logged as its text, not lost
        return json.dumps(line, ensure_ascii=False, default=str)


def logging_config(log_format: str, level: str) -> dict[str, object]:
    """``LOGGING`` for the settings: one console handler, carrying the ids, in the chosen format.
    Django's development server logs through it too, so a JSON log has no line of another shape."""
    formatter = {"()": JsonFormatter} if log_format == "json" else {"format": TEXT_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"ids": {"()": LogContextFilter}},
        "formatters": {"chosen": formatter},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "filters": ["ids"], "formatter": "chosen"},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # one line per finished task drowns the demo's console; failures still show
            "celery.app.trace": {"level": "WARNING"},
            "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        },
    }
