"""`manage.py demo`: seed, start the simulated fleet and in-process background work,
serve the portal until Ctrl-C."""

from __future__ import annotations

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from demo.job_numbers import FIRST, continue_numbering
from demo.seed import demo_seed
from broker.backends.sim import SimClock, SimulatorFleet
from broker.fleet_file import build_simulated_clusters, load_fleet
from broker.inprocess import Ticker


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
        self._start_fleet()
        self.stdout.write(self.style.SUCCESS(f"Serving on http://{addrport}/  (Ctrl-C to stop)"))
        call_command("runserver", addrport, use_reloader=False)

    def _start_fleet(self) -> None:

        fleet = SimulatorFleet.reset(clock=SimClock(follow_wall=True, time_scale=settings.GPUBROKER_SIM_TIME_SCALE))
        build_simulated_clusters(load_fleet(settings.GPUBROKER_FLEET_FILE), fleet)
        continued = {name: first for name, first in continue_numbering(fleet).items() if first > FIRST}
        if continued:  # a restart on a database that already holds jobs
            self.stdout.write(
                "Simulated jobs continue after the recorded ones: "
                + ", ".join(f"{name} from {first}" for name, first in sorted(continued.items()))
            )
        Ticker().start()
