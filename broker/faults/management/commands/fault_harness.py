"""manage.py fault_harness: drive workloads through crashes and failures, count invariant breaks.

    manage.py fault_harness --workloads 400 --faults 1000 --seed 7
    manage.py fault_harness --workloads 20 --faults 60 --seed 3 --slurm   # the real Slurm test cluster

Development tooling: the command exists only with ``GPUBROKER_DEV_TOOLS=1`` in a source
checkout (the setting installs ``broker.faults`` as an app; the wheel does not ship it).

Runs in a scratch database (``<name>_faults``, created and migrated, then dropped; SQLite:
in memory), so it never touches the portal's data.  Prints the faults injected per crash
point and the invariant table; exits 1 when any count is not zero or fewer faults than
asked for could be injected.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import connection


class Command(BaseCommand):
    help = "Fault-injection harness: crash the broker at every named point and count invariant breaks."

    def add_arguments(self, parser):
        parser.add_argument("--workloads", type=int, default=40, help="workloads to submit (default 40)")
        parser.add_argument("--faults", type=int, default=60, help="faults to inject (default 60)")
        parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
        parser.add_argument(
            "--slurm",
            action="store_true",
            help="use the real Slurm test cluster (scripts/slurm-cluster up) as the destination",
        )
        parser.add_argument("--points", default="", help="comma-separated crash points (default: all)")
        parser.add_argument("--keep-db", action="store_true", help="keep the scratch database afterwards")
        parser.add_argument("--quiet", action="store_true", help="no progress lines")

    def handle(self, *args, **opts):
        from broker.faults.harness import HarnessConfig, run_harness
        from broker.faults.points import POINTS_BY_NAME

        points = tuple(p.strip() for p in opts["points"].split(",") if p.strip())
        unknown = [p for p in points if p not in POINTS_BY_NAME]
        if unknown:
            raise CommandError(f"--points: unknown {unknown}; known: {', '.join(POINTS_BY_NAME)}")
        if opts["workloads"] < 1 or opts["faults"] < 0:
            raise CommandError("--workloads must be at least 1 and --faults at least 0")
        config = HarnessConfig(
            workloads=opts["workloads"],
            faults=opts["faults"],
            seed=opts["seed"],
            slurm=opts["slurm"],
            points=points,
            log=None if opts["quiet"] else (lambda t: self.stderr.write(t)),
        )
        old_name = connection.settings_dict["NAME"]
        test_settings = connection.settings_dict.setdefault("TEST", {})
        if connection.vendor != "sqlite" and not test_settings.get("NAME"):
            test_settings["NAME"] = f"{old_name}_faults"
        self.stderr.write(f"scratch database for the run ({connection.vendor}) ...")
        connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=opts["keep_db"])
        try:
            report = run_harness(config)
        finally:
            if not opts["keep_db"]:
                connection.creation.destroy_test_db(old_name, verbosity=0)
        self.stdout.write(
            f"$ manage.py fault_harness --workloads {config.workloads} --faults {config.faults} "
            f"--seed {config.seed}{' --slurm' if config.slurm else ''}"
        )
        self.stdout.write(report.table())
        self.stdout.write(f"faults injected: {report.faults}")
        if not report.ok:
            sys.exit(1)
