"""What the home page shows each role: the pages the navigation offers, with what each is for."""

from __future__ import annotations

from dataclasses import dataclass, field

from portal.pages.nav import links_for
from portal.tenancy.access import AnyUser, is_operator, roles_of
from portal.tenancy.selectors import project_list

# the home page's card titles where the navigation's short label says too little
_TITLES = {"workload-new": "Submit a job", "workload-list": "My workloads", "fleet": "Fleet overview"}


@dataclass
class HomeSummary:
    roles: set[str]
    operator: bool
    projects: list = field(default_factory=list)
    actions: list[tuple[str, str, str]] = field(default_factory=list)  # (title, url name, why)


def home_summary(*, user: AnyUser) -> HomeSummary:
    summary = HomeSummary(roles=roles_of(user), operator=is_operator(user))
    summary.projects = list(project_list(user=user))
    summary.actions = [
        (_TITLES.get(link.url_name, link.label), link.url_name, link.why) for link in links_for(user=user)
    ]
    return summary
