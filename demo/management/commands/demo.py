"""`manage.py demo`: seed, start the simulated fleet (its saved jobs taken up again) and
in-process background work, serve the portal until Ctrl-C (or SIGTERM), then save the
simulated clusters' state."""

from __future__ import annotations

import signal
import sys
from types import FrameType

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from demo.fleet import FleetStart, demo_schedule, fleet_start
from demo.job_numbers import FIRST
from demo.seed import demo_seed
from demo.services import simulated_clusters_save
from broker.inprocess import Ticker

STOP_WAIT_S = 30  # a pass the ticker is in the middle of finishes before the last save


class Command(BaseCommand):
    help = "Seed the demo and serve the portal with background work in-process."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--port", type=int, default=None, help="serve on this port (overrides addrport's)")
        parser.add_argument("--seed-only", action="store_true")

    def handle(self, *args, addrport: str, port: int | None, seed_only: bool, **options) -> None:

        if port is not None:
            if not 1 <= port <= 65535:
                raise CommandError(f"--port: expected 1-65535, got {port}")
            addrport = f"{addrport.rpartition(':')[0] or '127.0.0.1'}:{port}"

        seed = demo_seed()
        self.stdout.write(self.style.SUCCESS("Demo users (username / password / role):"))
        for username, password, role in seed.users:
            self.stdout.write(f"  {username:<12} {password:<18} {role}")
        self.stdout.write(f"Simulated clusters: {', '.join(seed.clusters)}")
        if seed_only:
            return
        self._report(
            fleet_start(fleet_file=settings.GPUBROKER_FLEET_FILE, time_scale=settings.GPUBROKER_SIM_TIME_SCALE)
        )
        ticker = Ticker(demo_schedule())
        ticker.start()
        self.stdout.write(self.style.SUCCESS(f"Serving on http://{addrport}/  (Ctrl-C to stop)"))
        # SIGTERM (docker stop, a test's kill) ends the server as Ctrl-C does, through the save below
        signal.signal(signal.SIGTERM, _exit)
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            ticker.stop_event.set()
            ticker.join(STOP_WAIT_S)
            self.stdout.write(f"Saved the state of {simulated_clusters_save()} simulated clusters")

    def _report(self, start: FleetStart) -> None:
        restored = start.restored
        if restored.jobs:
            self.stdout.write(
                "Simulated jobs taken up again: " + ", ".join(f"{n} {k}" for k, n in sorted(restored.jobs.items()))
            )
        for name, followed in sorted(restored.unsaved.items()):
            if followed:  # a database from before the demo saved its clusters
                self.stdout.write(f"{name}: no saved state; its {followed} followed workloads will show as lost jobs")
        for name, why in sorted(restored.refused.items()):
            self.stdout.write(self.style.WARNING(f"{name}: saved state not taken up ({why})"))
        continued = {name: first for name, first in start.numbering.items() if first > FIRST}
        if continued:  # a restart on a database that already holds jobs
            self.stdout.write(
                "Simulated jobs continue after the recorded ones: "
                + ", ".join(f"{name} from {first}" for name, first in sorted(continued.items()))
            )


def _exit(signum: int, frame: FrameType | None) -> None:
    sys.exit(0)
