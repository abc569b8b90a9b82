"""The navigation each role sees: every page it may open, and none it may not.

One table decides it, so the top navigation, the accounting overview and the tests
agree.  Labels are unique words on purpose: the browser tests click them by text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from django.http import HttpRequest
from django.urls import reverse

from portal.tenancy.access import AnyUser, is_operator, roles_of
from portal.tenancy.models import Role


@dataclass(frozen=True)
class NavLink:
    label: str
    url_name: str
    group: str
    why: str = ""

    @property
    def url(self) -> str:
        return reverse(self.url_name)


@dataclass(frozen=True)
class _Audience:
    """Who may open a page: any of these roles, or operators when ``operators`` is set."""

    roles: frozenset[str]
    operators: bool = False

    def admits(self, roles: set[str], operator: bool) -> bool:
        return bool(self.roles & roles) or (self.operators and operator)


_RESEARCH = _Audience(frozenset({Role.RESEARCHER}))
_FOLLOW = _Audience(frozenset({Role.RESEARCHER, Role.ADMIN}), operators=True)
_ADMIN = _Audience(frozenset({Role.ADMIN}), operators=True)
_FINANCE = _Audience(frozenset({Role.FINANCE}), operators=True)
_MEMBER = _Audience(frozenset(Role.values), operators=True)

# (link, audience), in the order the navigation shows them; groups are drawn apart
_PAGES: tuple[tuple[NavLink, _Audience], ...] = (
    (
        NavLink("Submit", "workload-new", "work", "Describe a GPU job once; the broker finds where it can run."),
        _RESEARCH,
    ),
    (NavLink("Workloads", "workload-list", "work", "Follow where jobs went, why they wait, and cancel them."), _FOLLOW),
    (
        NavLink(
            "Requests",
            "quota-request-list",
            "work",
            "Ask for more GPUs of a class for a while; the quota's owner decides.",
        ),
        _MEMBER,
    ),
    (
        NavLink(
            "Notifications",
            "notification-settings",
            "work",
            "Which job events reach you, by e-mail or a signed webhook.",
        ),
        _MEMBER,
    ),
    (NavLink("GPU-hours", "usage-mine", "accounting", "Your projects' GPU-hours, month by month."), _MEMBER),
    (NavLink("Quotas", "quota-list", "admin", "Global GPU quotas per tenant and class, edited inline."), _ADMIN),
    (NavLink("Reservations", "reservation-list", "admin", "Quota held for jobs on their way to a cluster."), _ADMIN),
    (
        NavLink("Escalations", "escalation-list", "admin", "Allocations nobody can explain, waiting for a decision."),
        _ADMIN,
    ),
    (
        NavLink("Chargeback", "chargeback", "accounting", "GPU-hours and cost per month, tenant and project; export."),
        _FINANCE,
    ),
    (
        NavLink(
            "Reconciliation",
            "reconciliation",
            "accounting",
            "The broker, the schedulers' records and the bills, compared per cluster.",
        ),
        _FINANCE,
    ),
    (NavLink("Bills", "bill-list", "accounting", "Upload cloud bills and see what they matched."), _FINANCE),
    (NavLink("Rates", "rate-list", "accounting", "On-prem GPU-hour rates, set directly or from TCO."), _FINANCE),
    (
        NavLink("Clusters", "cluster-list", "fleet", "Pools, prices, owner scheduler and freshness of every cluster."),
        _MEMBER,
    ),
    (NavLink("Fleet", "fleet", "fleet", "GPUs total, allocatable, reserved and idle; queue figures."), _MEMBER),
    (
        NavLink(
            "Policy",
            "policy-list",
            "fleet",
            "Placement policy versions: propose, replay the impact, approve, activate, roll back.",
        ),
        _Audience(frozenset(), operators=True),
    ),
)


_GROUP_ORDER = ("work", "admin", "accounting", "fleet")


def links_for(*, user: AnyUser) -> list[NavLink]:
    """Every portal page ``user`` may open, in navigation order."""
    if not user.is_authenticated:
        return []
    return _admitted(roles_of(user), is_operator(user))


def _admitted(roles: set[str], operator: bool) -> list[NavLink]:
    links = [link for link, audience in _PAGES if audience.admits(roles, operator)]
    return sorted(links, key=lambda link: _GROUP_ORDER.index(link.group))  # as the navigation shows them


def accounting_links(*, user: AnyUser) -> list[NavLink]:
    return [link for link in links_for(user=user) if link.group == "accounting"]


@dataclass(frozen=True)
class NavItem:
    link: NavLink
    current: bool


class Navigation:
    """What the header shows for one request, worked out only when the header is drawn:
    htmx partials never draw it, so they never pay for the membership query behind it."""

    def __init__(self, request: HttpRequest):
        self._request = request

    @cached_property
    def roles(self) -> list[str]:
        return sorted(roles_of(self._request.user))

    @cached_property
    def groups(self) -> list[list[NavItem]]:
        request = self._request
        links = _admitted(set(self.roles), is_operator(request.user)) if request.user.is_authenticated else []
        # the current page is the link whose address is the longest prefix of this one
        here = max(
            (lnk for lnk in links if request.path.startswith(lnk.url)), key=lambda lnk: len(lnk.url), default=None
        )
        groups: dict[str, list[NavItem]] = {name: [] for name in _GROUP_ORDER}
        for link in links:
            groups[link.group].append(NavItem(link, link is here))
        return [items for items in groups.values() if items]


def navigation(request: HttpRequest) -> dict[str, Navigation]:
    """Context processor: ``nav.groups`` (links by group) and ``nav.roles`` for the header."""
    return {"nav": Navigation(request)}
