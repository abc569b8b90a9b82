"""What a replay of the broker sets up around it, shared by both loops (the instant one,
``broker_strategy``, and the production one, ``production_broker``): the broker's clock on
the simulated clock, no Celery hand-offs unless a loop works them, the policy with a preset,
a bot researcher and the replay's tenants with a quota that never binds.

Only the broker's own models and services: nothing here reads the simulator or the
harness (tests/conventions check it)."""

from __future__ import annotations

import contextlib
import itertools
from decimal import Decimal
from datetime import datetime, timedelta
from typing import Callable, Iterator, Protocol

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User

from broker import runtime
from broker.fleet_file import FleetDescription
from broker.models import Cluster, GpuClass, Quota, Workload
from broker.replay.jobs import TENANT_PREFIX
from broker.services.fleet.policy import current_policy, policy_override
from broker.services.fleet.registration import clusters_from_fleet, gpu_classes_from_policy
from portal.tenancy.models import Membership, Project, Role, Tenant

BOT_USERNAME = "replay-bot"
UNLIMITED_GPUS = 1_000_000
TaskSink = Callable[..., object]


class Clock(Protocol):
    """The run's clock as the broker needs it (the harness passes the simulator's)."""

    @property
    def seconds(self) -> float: ...

    def at(self, seconds: float) -> datetime: ...


class ReplayNow:
    """The broker's clock on the simulated clock, one microsecond per call within an
    instant so that records written one after another keep their order."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._instant = float("nan")
        self._ticks = itertools.count()

    def __call__(self) -> datetime:
        seconds = self.clock.seconds
        if seconds != self._instant:
            self._instant, self._ticks = seconds, itertools.count()
        return self.clock.at(seconds) + timedelta(microseconds=next(self._ticks))


@contextlib.contextmanager
def broker_context(
    clock: Clock, preset: str | None, policy_text: str | None = None, task_sink: TaskSink | None = None
) -> Iterator[None]:
    """Simulated time, the services' follow-ups to ``task_sink`` (default: dropped, the loop
    calls the services itself) and the policy: ``policy_text`` (default: the one in force),
    with its preset replaced when ``preset`` is given."""
    with runtime.override(now=ReplayNow(clock), task_sink=task_sink or _drop):
        if preset is not None:
            policy_text = policy_with_preset(preset, policy_text or current_policy().text)
        if policy_text is None:
            yield
        else:
            with policy_override(policy_text):
                yield


def _drop(*task: object) -> None:
    return None


def policy_with_preset(preset: str, text: str) -> str:
    """The policy text with only its ``preset:`` line changed."""
    lines = [f"preset: {preset}" if line.startswith("preset:") else line for line in text.splitlines()]
    if lines == text.splitlines() and f"preset: {preset}" not in lines:
        lines.append(f"preset: {preset}")
    return "\n".join(lines) + "\n"


def clear_replay_rows(fleet: FleetDescription, prefix: str = TENANT_PREFIX) -> None:
    """Remove what an earlier replay left: its workloads (with their reservations,
    attempts and audit records) and the fleet's cluster rows."""
    Workload.objects.filter(tenant__slug__startswith=prefix).delete()
    Cluster.objects.filter(name__in=fleet.names).delete()


def replay_bot() -> User:
    user, created = User.objects.get_or_create(username=BOT_USERNAME)
    if created:
        user.set_unusable_password()  # it submits through the services, never logs in
        user.save()
    return user


def tenant_project(
    tenant: str, user: AbstractBaseUser, prefix: str = TENANT_PREFIX, cloud_budget: Decimal | None = None
) -> int:
    """The tenant's project id, with the bot as a researcher, an unbounded quota and the
    monthly cloud budget (None: none, bursting is capped by nothing)."""
    slug = f"{prefix}{tenant}"
    tenant_row, _ = Tenant.objects.update_or_create(
        slug=slug, defaults={"name": f"Replay {tenant}", "cloud_budget_month": cloud_budget}
    )
    project, _ = Project.objects.get_or_create(
        tenant=tenant_row,
        slug="main",
        defaults={"name": f"Replay {tenant}", "slurm_account": slug, "k8s_namespace": slug},
    )
    Membership.objects.get_or_create(user_id=user.pk, tenant=tenant_row, project=None, role=Role.RESEARCHER)
    for gpu_class in GpuClass.objects.all():
        Quota.objects.update_or_create(tenant=tenant_row, gpu_class=gpu_class, defaults={"limit_gpus": UNLIMITED_GPUS})
    return project.id


class ReplayTenants:
    """What a broker preset's replay sets up before its first job: the fleet's cluster rows
    afresh (an earlier replay's rows removed), the GPU classes, the bot, and each tenant's
    project on first use (with the replay's cloud budget)."""

    def __init__(self, fleet: FleetDescription, prefix: str, cloud_budget: Decimal | None = None):
        clear_replay_rows(fleet, prefix)
        gpu_classes_from_policy()
        self.clusters = {c.name: c.id for c in clusters_from_fleet(fleet=fleet)}
        self.user = replay_bot()
        self.prefix, self.cloud_budget = prefix, cloud_budget
        self._projects: dict[str, int] = {}

    def project(self, tenant: str) -> int:
        project_id = self._projects.get(tenant)
        if project_id is None:
            project_id = self._projects[tenant] = tenant_project(tenant, self.user, self.prefix, self.cloud_budget)
        return project_id
