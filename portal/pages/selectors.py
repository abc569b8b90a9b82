"""What the home page shows each role."""
from __future__ import annotations

from dataclasses import dataclass, field

from portal.tenancy.access import AnyUser, is_operator, roles_of
from portal.tenancy.models import Role
from portal.tenancy.selectors import project_list


@dataclass
class HomeSummary:
    roles: set[str]
    operator: bool
    projects: list = field(default_factory=list)
    actions: list[tuple[str, str, str]] = field(default_factory=list)  # (title, url name, why)


_ACTIONS: dict[str, list[tuple[str, str, str]]] = {
    Role.RESEARCHER: [
        ("Submit a job", "workload-new", "Describe a GPU job once; the broker finds where it can run."),
        ("My workloads", "workload-list", "Follow where your jobs went, why they wait, and cancel them."),
        ("GPU-hours", "usage-mine", "Your projects' GPU-hours this month."),
    ],
    Role.ADMIN: [
        ("Quotas", "quota-list", "Global GPU quotas per tenant and class, and their owners."),
        ("Clusters", "cluster-list", "Pools, prices, owner scheduler and freshness of every cluster."),
        ("Reservations", "reservation-list", "Quota held for jobs on their way to a cluster."),
        ("Escalations", "escalation-list", "Allocations nobody can explain, waiting for a decision."),
    ],
    Role.FINANCE: [
        ("Chargeback", "chargeback", "GPU-hours and cost per period, tenant and project; export."),
        ("Bills", "bill-list", "Upload cloud bills and see how they reconcile."),
        ("Accounting", "accounting-index", "Every accounting page: reconciliation, rates and more."),
    ],
}


def home_summary(*, user: AnyUser) -> HomeSummary:
    roles = roles_of(user)
    summary = HomeSummary(roles=roles, operator=is_operator(user))
    summary.projects = list(project_list(user=user))
    for role in (Role.RESEARCHER, Role.ADMIN, Role.FINANCE):
        if role in roles:
            summary.actions.extend(_ACTIONS[role])
    if not any(urlname == "cluster-list" for _, urlname, _ in summary.actions):
        summary.actions.append(("Clusters", "cluster-list", "Every cluster's pools, prices and freshness."))
    summary.actions.append(("Fleet overview", "fleet", "GPUs total, allocatable, reserved and idle."))
    return summary
