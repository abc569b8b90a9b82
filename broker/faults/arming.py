"""When the harness arms a fault and how it takes a cluster down and brings it back:
functions of the harness (bound as its methods), kept apart from its main loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.backends.base import Rejected
from broker.faults.environments import PREFIX, SlurmEnvironment

if TYPE_CHECKING:
    from broker.faults.harness import Harness

# Points armed only just before the step they belong to (they match any hook).
PER_STEP_POINTS = {"during_reconcile", "worker_killed_mid_task", "postgres_connection_dropped"}


def next_point(self: Harness) -> str:
    if self.fired >= self.cfg.faults:  # asked-for count reached: only the points not yet seen
        counts = self.plan.counts()
        unseen = [p for p in self.points if not counts.get(p, 0)]
        if unseen:
            return self.rng.choice(unseen)
    if not self.cycle:
        self.cycle = list(self.points)
        self.rng.shuffle(self.cycle)
    return self.cycle.pop()


def maybe_arm(self: Harness) -> None:
    if self.rng.random() > 0.15:
        return
    point = self._next_point()
    armed_points = [a.point for a in self.plan.armed]
    if point in PER_STEP_POINTS:
        if point not in self.pending_step_faults:
            self.pending_step_faults.append(point)
        return
    if point in armed_points:
        return
    cluster = self.rng.choice(self.cluster_names)
    if point == "redis_restarted":
        self.plan.record(point)
        self.queue.clear()
    elif point in ("slurmctld_stop_start", "unreachable_past_staleness"):
        if cluster in self.outages:
            return
        if point == "slurmctld_stop_start":
            length = self.rng.uniform(10, self.staleness_s * 0.6) if not self.cfg.slurm else self.rng.uniform(5, 20)
        else:
            length = self.rng.uniform(self.staleness_s + 60, self.staleness_s + self.ttl_s + 400)
        self._begin_outage(cluster, point, length)
    elif point == "orphan_job":
        if self.cfg.slurm and self.rng.random() < 0.5:
            return
        if cluster in self.outages:
            # nobody submits to a controller that is down (on real Slurm sbatch fails: "Unable
            # to contact slurm controller", seen in CI on 24.11): the orphan comes later
            return
        key = self.env.inject_orphan(cluster)
        self.watch.foreign_jobs.add(key)
        self.plan.record(point, cluster=cluster)
    elif point == "destination_rejects":
        self.plan.arm(point, hook="submit:before", action=_reject)
    elif point == "lost_job":
        self.plan.arm(point, hook="submit:before", action=lambda hook, c: self.env.lose_next_job(c))
    elif point == "reconcile_after_expire":
        # an expiry needs a workload on its way to a cluster that then stays silent past the
        # reservation's expiry: take such a workload's cluster down (a counted outage) first
        from broker.models import Workload

        target = (
            Workload.objects.filter(
                name__startswith=PREFIX,
                state__in=("reserved", "dispatching"),
                destination_job_id="",
                cluster__isnull=False,
            )
            .exclude(cluster__name__in=list(self.outages))
            .values_list("cluster__name", flat=True)
            .first()
        )
        if target is None:
            return
        if "unreachable_past_staleness" in self.points:
            self._begin_outage(target, "unreachable_past_staleness", self.ttl_s + self.rng.uniform(100, 300))
        else:
            self.plan.unreachable.add(target)
            self.outages[target] = (self.vnow() + self.ttl_s + self.rng.uniform(100, 300), "(setup)")
        self.plan.arm(point)
    elif point == "after_reject_before_replace":
        # the crash needs a rejection to follow; that rejection is not counted again
        self.plan.arm("(setup)", hook="submit:before", action=_reject)
        self.plan.arm(point)
    else:
        self.plan.arm(point)


def begin_outage(self: Harness, cluster: str, point: str, length_s: float) -> None:
    self.plan.record(point, cluster=cluster)
    self.plan.unreachable.add(cluster)
    real = (
        self.cfg.slurm
        and point == "slurmctld_stop_start"  # cfg.slurm: a SlurmEnvironment
        and isinstance(self.env, SlurmEnvironment)
        and self.env.real_restarts < 5
    )
    if real:
        self.env.controller(cluster, up=False)
    self.outages[cluster] = (self.vnow() + length_s, point + (":real" if real else ""))
    self.log(f"outage of {cluster} ({point}) for {length_s:.0f} s")


def restore_controllers(self: Harness) -> None:
    for cluster, (_, point) in list(self.outages.items()):
        if point.endswith(":real"):
            self.env.controller(cluster, up=True)
            self.outages[cluster] = (0.0, point.removesuffix(":real"))


def end_outages(self: Harness) -> None:
    now = self.vnow()
    for cluster, (ends, point) in list(self.outages.items()):
        if now >= ends:
            if point.endswith(":real"):
                self.env.controller(cluster, up=True)
            self.plan.unreachable.discard(cluster)
            del self.outages[cluster]


def _reject(hook: str, cluster: str) -> None:
    raise Rejected(
        "fault injected: the destination refused the job (local admission)",
        f"sbatch: error: Batch job submission failed: fault injected on {cluster}",
    )
