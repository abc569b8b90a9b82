"""Fleet priority classes: the names researchers submit at, each with the level the broker
ranks it by and what it is called on each control plane.

The policy (key ``priority_classes``) names them, for example ``production`` (level high),
``normal`` and ``scavenger`` (level low).  The level (low, normal, high) orders the broker's
own queue and says who may preempt whom (``broker.placement.preemption``); ``slurm_qos``,
``kueue`` (a WorkloadPriorityClass) and ``volcano`` (a PriorityClass) are what the backends
put on the job at that control plane, over the cluster's own mapping of the level.  Each
tenant may submit at the classes the policy grants it (``tenants.<name>.priority_classes``,
default all).  Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.spec import PRIORITIES

PLANES = ("slurm_qos", "kueue", "volcano")


@dataclass(frozen=True)
class PriorityClass:
    name: str
    level: str = "normal"
    slurm_qos: str = ""
    kueue: str = ""
    volcano: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        if self.level not in PRIORITIES:
            raise ValueError(f"level: one of {', '.join(PRIORITIES)}, not {self.level!r}")

    def on(self, plane: str) -> str:
        """Its name at a control plane ("" when the cluster's own mapping of the level holds)."""
        return str(getattr(self, plane))
