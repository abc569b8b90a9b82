"""`manage.py slurm_accounts [--create]`: report (or create) each project's Slurm account."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from broker.services.fleet.identity import slurm_accounts_ensure


class Command(BaseCommand):
    help = "Check that every project's Slurm account exists on every Slurm cluster; --create adds missing ones."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--create", action="store_true", help="add missing accounts with sacctmgr")

    def handle(self, *args, create: bool, **options) -> None:

        results = slurm_accounts_ensure(create=create)
        for r in results:
            state = "created" if r.created else ("ok" if r.exists else "MISSING")
            self.stdout.write(f"{r.cluster:<20} {r.account:<20} {state:<8} {r.project} {r.detail}")
        if not results:
            self.stdout.write("no Slurm clusters or no projects with a Slurm account")
