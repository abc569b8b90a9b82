"""What the demo keeps in its database besides the broker's own rows."""

from __future__ import annotations

from django.db import models


class SimulatedClusterState(models.Model):
    """One simulated cluster's jobs, nodes and position in time (broker/backends/sim/snapshot.py),
    saved as the demo runs so that a restart on the same database takes its jobs up again."""

    cluster = models.CharField(max_length=100, unique=True, help_text="the simulated cluster's name")
    state = models.JSONField()
    saved_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.cluster}, saved at {self.saved_at:%Y-%m-%d %H:%M:%S}"
