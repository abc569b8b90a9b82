"""How many messages wait in each Celery queue, read from the Redis broker at each scrape.

Celery's Redis transport keeps a queue as a Redis list named after the queue (a message
with a priority above 0 goes to a list of its own, which the broker's tasks never use), so
the depth is the list's length.  With no broker (tasks run in the process that asks for
them) or another kind of broker there is no queue to read and nothing is reported.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol
from urllib.parse import urlsplit

import redis

log = logging.getLogger(__name__)
REDIS_SCHEMES = ("redis", "rediss")
# a scrape must answer even when Redis does not; Prometheus's own timeout is 10 s by default
TIMEOUT_S = 2.0


class ListLengths(Protocol):
    """What the depth reader needs of a Redis client (redis.Redis has it)."""

    def llen(self, name: str) -> int: ...


def queue_depths(client: ListLengths, queues: Iterable[str]) -> dict[str, int]:
    """Queue name -> messages waiting in it."""
    return {queue: int(client.llen(queue)) for queue in queues}


def broker_queue_depths(broker_url: str, queues: Iterable[str]) -> dict[str, int]:
    """The depths in the Redis broker at ``broker_url``; empty without a Redis broker, or when
    it cannot be reached (logged: the series goes missing rather than reading zero)."""
    if urlsplit(broker_url).scheme not in REDIS_SCHEMES:
        return {}
    client = redis.Redis.from_url(broker_url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S)
    try:
        return queue_depths(client, queues)
    except redis.RedisError as exc:
        log.warning("Celery queue depth not read from the broker: %s", exc)
        return {}
    finally:
        client.close()
