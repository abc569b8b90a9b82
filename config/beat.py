"""Celery beat's scheduler for this product: the stock persistent scheduler, ticking only
while it holds the database lease ``broker.services.fleet.beat_lease`` (one beat schedules;
a second one waits, logs once whose lease it is, and takes over when that lease runs out)."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any

from celery.beat import PersistentScheduler
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from broker.services.fleet.beat_lease import beat_lease_holder, beat_lease_release, beat_lease_take

log = logging.getLogger(__name__)
LEASE = "celery-beat"


class SingleBeatScheduler(PersistentScheduler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ttl_s = float(settings.GPUBROKER_BEAT_LEASE_S)
        self.waiting = False
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        close_old_connections()
        try:
            taken = beat_lease_take(name=LEASE, holder=self.holder, ttl_s=self.ttl_s)
        except (OperationalError, InterfaceError) as exc:
            # the database restarted or cut the connection: beat stayed up and asks again soon
            # (it exited here before, and with it every periodic pass until someone restarted it);
            # it schedules nothing meanwhile, since it cannot know that it still holds the lease
            log.warning("beat cannot reach the database (%s): schedules nothing, asks again in 2 s", exc)
            connection.close()
            return 2.0
        if not taken:
            if not self.waiting:
                held = beat_lease_holder(name=LEASE)
                log.warning("another beat holds the schedule (%s): this one schedules nothing", held)
                self.waiting = True
            return self.ttl_s / 3  # look again well before the holder's lease could run out
        if self.waiting:
            log.warning("beat %s took the schedule over", self.holder)
            self.waiting = False
        return float(min(super().tick(*args, **kwargs), self.ttl_s / 3))  # renew in time

    def close(self) -> None:
        try:
            beat_lease_release(name=LEASE, holder=self.holder)
        except (OperationalError, InterfaceError) as exc:  # it runs out by itself
            log.warning("beat could not release its lease (%s)", exc)
        super().close()
