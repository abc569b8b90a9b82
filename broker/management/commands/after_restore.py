"""`manage.py after_restore`: once, on a database restored from a backup, before the workers
and the beat start (docs/operations.md, "Backup and restore")."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from broker.services.following.restore import workloads_mark_restored


class Command(BaseCommand):
    help = (
        "On a database restored from a backup: mark every workload on its way to a cluster as possibly "
        "dispatched after the backup, so the broker looks it up there (and adopts its job) before sending it."
    )

    def handle(self, *args, **options) -> None:
        report = workloads_mark_restored()
        self.stdout.write(f"{len(report.marked)} workload(s) on their way to a cluster: looked up before any send")
        for uid in report.marked:
            self.stdout.write(f"  {uid}")
