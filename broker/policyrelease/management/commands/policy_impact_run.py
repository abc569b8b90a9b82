"""`manage.py policy_impact_run INPUT.json`: the child process of an impact replay.

The replay replaces the process-wide simulated fleet and reads time from a simulated
clock, so it cannot share a process with the portal; and it writes thousands of rows,
so it runs in a throwaway database (as ``replay_trace`` does).  It reads the jobs, the
fleet and the policy texts from INPUT, prints ``PROGRESS <percent> <message>`` lines and,
last, ``RESULT <json>``.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from broker.management.commands.replay_trace import isolated_database
from broker.policyrelease.history import fleet_from_json, jobs_from_json
from broker.policyrelease.impact import compare


class Command(BaseCommand):
    help = "Run one policy impact replay (started by the portal's background task)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("input", help="JSON: {jobs, fleet, policies: {label: text}}")

    def handle(self, *args, **opts) -> None:
        data = json.loads(Path(opts["input"]).read_text(encoding="utf-8"))
        jobs, fleet = jobs_from_json(data["jobs"]), fleet_from_json(data["fleet"])

        def progress(pct: int, message: str) -> None:
            self.stdout.write(f"PROGRESS {pct} {message}")
            self.stdout.flush()

        progress(1, "preparing a throwaway database")
        with isolated_database():
            result = compare(jobs, fleet, data["policies"], progress)
        self.stdout.write("RESULT " + json.dumps(result))
