"""The production-loop replay: our presets run on simulated time as beat and a worker run
them, and the broker learns only from its own syncs and polls.

The harness plays Celery beat with the one schedule production uses
(``settings.CELERY_BEAT_SCHEDULE``): at each of its ticks the due entries run in a fixed
order (``BEAT_ORDER``; in production they race, here status first so a pass sees what the
poll saw), then the worker (``ProductionBroker.work``) runs every follow-up the services
queued, as Celery would at once.  Jobs arrive at their own instants: a researcher's job is
submitted through the service (whose follow-up places it at once, as in production), a local
user's goes straight into its cluster (``local_jobs``).  Between the broker's reads the
clusters move on by themselves: jobs end and queued ones start at the instants the
simulator gives, which the harness's tracker records as the ground truth every policy is
scored on.

What the harness may leave out, and why it changes no decision (``Skipping``; a test replays
a slice both ways and compares every decision, ``bench/`` the 500-job version):

* a status poll of a cluster where nothing was submitted, started or left since the last
  poll (the simulator's change counter): it would change no workload;
* an inventory sync of such a cluster, when the last one is younger than the policy's
  staleness limit less two intervals: the report would carry the same numbers, the same
  promised GPUs (nothing was dispatched there since, or the counter would have moved), and
  its age passes the same freshness rule;
* a placement pass when nothing it reads has changed since the last one: no submission, no
  report with other numbers, no workload that changed state (poll, follow-up, withdrawal,
  reconcile).  A workload that found no place is due again at the next change of capacity
  anyway (``Cluster.capacity_changed_at``), so the looks a skipped pass would have made
  only moved its pause.

Four rules of the broker read the clock, and the harness runs what they need when they need
it: a big gang past its hold age that holds no pool yet makes every pass run
(``_gang_past_hold_age``), a job of the broker's that reached its queue-after age since the
last pass makes the next pass run (``_crossed_queue_age``), one that reached the policy's
preemption wait (``preemption.after_s``, where the broker owns preemption) makes the next
preemption pass run (``_preempt_due``), and a reservation held unconfirmed past its expiry
makes the next reconcile run (``_expired``); withdrawing policy holds and moving queued jobs
run while any of the broker's jobs waits at a destination.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import reduce
from typing import Any, Sequence

from django.conf import settings
from django.db import transaction

from broker.backends.registry import backend_override
from broker.replay.jobs import TENANT_PREFIX, ReplayJob
from broker.replay.local_jobs import inject
from broker.replay.loop import ESTIMATOR_EXTRAS, ReplayEnv, ReplayRun, collect_run
from broker.replay.production_broker import ProductionBroker
from broker.services.fleet.policy import current_policy

# the beat entries the replay runs, in the order it runs those due at one instant
BEAT_ORDER = (
    "status",
    "inventory",
    "withdraw-policy-holds",
    "move-queued",
    "reconcile",
    "broker-preempt",
    "place-waiting",
)
# the others, with why leaving them out changes no decision (a test keeps this list whole)
NOT_REPLAYED = {
    "multikueue-dispatch": "a replay fleet has no MultiKueue manager in dispatcher mode",
    "collect-usage": "accounting reads what ran; the replay scores usage from the clusters' own records",
    "sample-fleet": "metric samples decide nothing",
    "end-quota-requests": "a replay has no quota requests",
    "notify-long-waits": "notifications decide nothing",
    # (a policy with burst.over_tco: stop would need it: the replayed policies warn)
    "cloud-tco": "with burst.over_tco at warn, the replayed policies' setting, it tells and decides nothing",
    # (a budget is held at submission against the ledger, which the replay does not collect)
    "budget-check": "it tells and decides nothing; the replay refuses a budget on any of its tenants",
}
# after the last arrival, with nothing left running or queued at any cluster, how long the
# broker's own waiting workloads are given before the replay ends (they can never start)
IDLE_LIMIT_S = 3600.0
# after the last arrival, with jobs still waiting at clusters but nothing running anywhere and
# nothing for the broker to do, this long: nothing will ever start them (no job will end to
# free GPUs; an elastic node comes within minutes), so the replay stops with an error naming
# them, where it would otherwise step through inventory syncs for ever
STUCK_LIMIT_S = 86400.0


class ReplayStuck(RuntimeError):
    """Jobs wait at clusters with nothing running that could ever free room for them."""


@dataclass(frozen=True)
class Skipping:
    """What the harness may elide (see the module's docstring); ``on=False`` runs every
    entry at every tick, the reference the equivalence test compares with."""

    on: bool = True


def beat_intervals() -> dict[str, float]:
    schedule: dict[str, dict[str, Any]] = settings.CELERY_BEAT_SCHEDULE
    return {key: float(schedule[key]["schedule"]) for key in BEAT_ORDER}


class _Recorder:
    """Hooked into the broker's backend seam: which destination jobs the broker created or
    cancelled, for the tracker.  It changes nothing on the way."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str | None]] = []  # (what, cluster, job id, workload uid)

    def build(self, cluster: Any, default: Any) -> Any:
        return _Recording(default(cluster), cluster.name, self.events)


class _Recording:
    def __init__(self, inner: Any, cluster: str, events: list[tuple[str, str, str, str | None]]):
        self._inner, self._cluster, self._events = inner, cluster, events

    def submit(self, spec: Any, workload_id: str, identity: Any) -> str:
        job_id: str = self._inner.submit(spec, workload_id, identity)
        self._events.append(("submit", self._cluster, job_id, workload_id))
        return job_id

    def cancel(self, job_id: str) -> bool:
        done: bool = self._inner.cancel(job_id)
        self._events.append(("cancel", self._cluster, job_id, None))
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def run_production(
    jobs: Sequence[ReplayJob], broker: ProductionBroker, env: ReplayEnv, skipping: Skipping | None = None
) -> ReplayRun:
    """Replay ``jobs`` (by submit_s) through ``broker`` until nothing is left to happen.
    Call inside ``broker_context`` with ``task_sink=broker.sink``."""
    if transaction.get_connection().in_atomic_block:
        # the services hand their follow-ups over when their transaction commits: inside an
        # outer one none would ever reach the worker, and the broker would silently do nothing
        raise RuntimeError("the production-loop replay needs every transaction committed (not inside atomic())")
    recorder = _Recorder()
    with backend_override(recorder.build):
        return _Loop(jobs, broker, env, skipping or Skipping(), recorder).run()


class _Loop:
    def __init__(
        self, jobs: Sequence[ReplayJob], broker: ProductionBroker, env: ReplayEnv, skip: Skipping, rec: _Recorder
    ):
        self.jobs, self.broker, self.env, self.skip, self.recorder = jobs, broker, env, skip, rec
        self.every = beat_intervals()
        self.step = float(reduce(math.gcd, (int(v) for v in self.every.values())))
        self.keys: dict[str, str] = {}  # workload uid -> job key
        self.submitted: list[float] = []  # the broker's jobs' submission instants, in order
        self.uids: dict[str, str] = {}  # and back
        self.gen = 0  # bumped whenever something a placement pass reads has changed
        self.pass_gen = self.reconcile_gen = -1
        self.pass_at = -math.inf  # when a placement pass last ran (see _crossed_queue_age)
        self.preempt_gen, self.preempt_at = -1, -math.inf  # the same for the preemption pass
        names = env.view.names
        self.seen = dict.fromkeys(names, -1)  # cluster version the tracker last looked at
        self.polled = dict.fromkeys(names, -1)
        self.synced: dict[str, tuple[int, float]] = dict.fromkeys(names, (-1, -math.inf))
        self.i = 0
        self.stuck_since = math.inf  # see _check_stuck
        self.big: list[str] = []  # the broker's big gangs not yet started (see _gang_past_hold_age)

    def run(self) -> ReplayRun:
        self.broker.begin()
        policy = current_policy().policy
        if policy.burst.over_tco != "warn":  # see NOT_REPLAYED["cloud-tco"]
            raise ValueError("burst.over_tco: the production-loop replay does not run the cloud-TCO check; use warn")
        if any(b.tenant.startswith(TENANT_PREFIX) for b in policy.budgets):  # see NOT_REPLAYED["budget-check"]
            raise ValueError("budgets: the production-loop replay collects no usage ledger to hold budgets against")
        self.aging = policy.aging
        # where the broker owns preemption: its pass reads the clock (a wait past after_s)
        self.preempt_after = policy.preemption.after_s if policy.preemption.broker_owns_any else None
        interval = self.every["inventory"]
        self.resync_s = max(interval, float(policy.staleness_limit_s) - 2 * interval)
        self.due = dict.fromkeys(BEAT_ORDER, 0.0)
        now, idle_since = 0.0, math.inf
        # a cluster in production has reported long before the first job arrives
        self._advance(now)
        for name in self.broker.clusters:
            self.broker.sync(name)
            self.synced[name] = (self._version(name), now)
        while True:
            now = self._next_instant(now)
            for key, at in self.due.items():  # ticks passed over did nothing: the next is ahead
                if at < now:
                    self.due[key] = self._tick_at_or_after(now, self.every[key])
            self._advance(now)
            self._freshen(now)
            self._arrive(now)
            for key in BEAT_ORDER:
                if self.due[key] <= now:
                    self._beat(key, now)
                    self.due[key] = self._tick_after(now, self.every[key])
            self._work(now)
            self._check_stuck(now)
            if self.i < len(self.jobs) or self._busy():
                idle_since = math.inf
            elif self.broker.live() == 0 or now - min(idle_since, now) >= IDLE_LIMIT_S:
                break
            else:
                idle_since = min(idle_since, now)
        extra = self.broker.finish()
        run = collect_run(self.broker.name, self.env, now, extra)
        run.estimator = self.broker.estimator
        if run.estimator is not None:
            error = run.estimator.overall
            run.extra.update({key: round(getattr(error, name)) for name, key in ESTIMATOR_EXTRAS.items()})
        return run

    def _next_instant(self, now: float) -> float:
        """The next arrival or beat tick; when skipping, the ticks at which nothing could
        happen are passed over: to the tick at or after the clusters' next change by
        themselves (a job ends), unless something already waits for a tick."""
        arrival = self.jobs[self.i].submit_s if self.i < len(self.jobs) else math.inf
        tick = min(self.due.values())
        if not self.skip.on or self._tick_work(now):
            return max(now, min(arrival, tick))
        event = min(
            (t for t in (c.next_event() for c in self.env.view.clusters.values()) if t is not None), default=math.inf
        )
        event = min(event, self._next_gang_hold_age(now), self._next_queue_age(now), self._next_preempt_age(now))
        expiry = self._next_expiry()
        if expiry < math.inf:  # reconcile looks at reservations run out before its tick
            event = min(event, self._tick_at_or_after(expiry, self.every["reconcile"]))
        # an unchanged cluster's report is taken again before it nears the staleness limit,
        # at an inventory tick, whatever happens next: a change after a long quiet spell must
        # find a fresh report, as the every-30-s syncs would have left one
        due_fresh = min(at for _, at in self.synced.values()) + self.resync_s
        event = min(event, self._tick_at_or_after(due_fresh, self.every["inventory"]))
        if event == math.inf:
            # nothing runs, nothing is due: the next arrival, or a last tick before the end
            return max(now, arrival if arrival < math.inf else tick)
        return max(now, min(arrival, max(tick, self._tick_at_or_after(event, self.step))))

    def _tick_work(self, now: float) -> bool:
        """Something a beat entry would act on at its next tick."""
        return (
            bool(self.broker.queue)
            or any(self._version(n) != self.polled[n] for n in self.polled)
            or any(self._version(n) != self.synced[n][0] or self.env.tracker.pending_at(n) for n in self.synced)
            or self.gen != self.pass_gen
            or self.gen != self.reconcile_gen
            or (self.preempt_after is not None and self.gen != self.preempt_gen)
            or self.env.tracker.pending(local=False) > 0
            or self._gang_past_hold_age(now)
            or self._expired(now)
        )

    # -- the one rule of placement that reads the clock ---------------------------------
    # A big gang waiting past ``aging.hold_after_s`` may hold a pool (broker/placement/
    # fairness.py), so from then on a pass can decide something new with nothing changed:
    # while such a gang waits, every pass runs, as beat runs them.
    def _waiting_big_gangs(self) -> list[ReplayJob]:
        outcomes = self.env.tracker.outcomes
        self.big = [k for k in self.big if outcomes[k].start_s is None]
        return [outcomes[k].job for k in self.big]

    def _gang_past_hold_age(self, now: float) -> bool:
        """A waiting big gang past its hold age that holds no pool yet (the broker's own
        records say which hold one: a hold changes nothing with time until its gang starts)."""
        past = [j.key for j in self._waiting_big_gangs() if now - j.submit_s >= self.aging.hold_after_s]
        if not past:
            return False
        holding = self.broker.holding([self.uids[k] for k in past])
        return any(self.uids[k] not in holding for k in past)

    def _next_gang_hold_age(self, now: float) -> float:
        ages = [job.submit_s + self.aging.hold_after_s for job in self._waiting_big_gangs()]
        return min((t for t in ages if t > now), default=math.inf)

    def _crossed_queue_age(self, now: float) -> bool:
        """A job of the broker's reached its queue-after age (``aging.queue_after_s``) since
        the last pass ran: a pass now may send it to wait at a destination (the broker's
        ``due`` makes it due whatever its pause)."""
        return self._crossed_age(self.aging.queue_after_s, self.pass_at, now)

    def _crossed_age(self, after: float | None, since: float, now: float) -> bool:
        """One of the broker's jobs became ``after`` old between ``since`` and ``now``."""
        if after is None:
            return False
        # arrivals are in submission order, so the crossings are sorted: the first after
        # ``since`` decides (a crossing of a job that started meanwhile runs a pass for nothing)
        first = bisect.bisect_right(self.submitted, since - after)
        return first < len(self.submitted) and self.submitted[first] + after <= now

    def _next_queue_age(self, now: float) -> float:
        return self._next_age(now, self.aging.queue_after_s)

    def _next_age(self, now: float, after: float | None) -> float:
        """The first instant after ``now`` at which one of the broker's jobs is ``after`` old."""
        if after is None:
            return math.inf
        first = bisect.bisect_right(self.submitted, now - after)
        return self.submitted[first] + after if first < len(self.submitted) else math.inf

    # -- the preemption pass's clock (where the broker owns preemption) --------------------
    # A workload waiting past ``preemption.after_s`` may preempt, so a pass may decide
    # something new with nothing changed when one of the broker's jobs reaches that age
    # (one that started meanwhile runs a pass for nothing).
    def _preempt_due(self, now: float) -> bool:
        if self.preempt_after is None:
            return False
        return self.gen != self.preempt_gen or self._crossed_age(self.preempt_after, self.preempt_at, now)

    def _next_preempt_age(self, now: float) -> float:
        return self._next_age(now, self.preempt_after)

    # -- reconcile's clock: a reservation held unconfirmed past its expiry ---------------
    def _next_expiry(self) -> float:
        at = self.broker.next_reservation_expiry()
        return math.inf if at is None else self.env.sim.clock.to_seconds(at)

    def _expired(self, now: float) -> bool:
        return self._next_expiry() <= now  # reconcile reads the clock a microsecond on

    @staticmethod
    def _tick_at_or_after(t: float, every: float) -> float:
        return math.ceil(t / every) * every

    @staticmethod
    def _tick_after(t: float, every: float) -> float:
        return (math.floor(t / every) + 1) * every

    def _freshen(self, now: float) -> None:
        """When skipping: an unchanged cluster's report is taken again only once it nears
        the staleness limit, right before anything could read it (its age then passes the
        freshness rule as the every-30-s report's does)."""
        if not self.skip.on:
            return
        for name in self.broker.clusters:
            version, at = self.synced[name]
            # only a report with the numbers of the last one: a change waits for its tick,
            # as it would in production (and comes within one interval, well inside the limit)
            if now - at >= self.resync_s and version == self._version(name):
                self.gen += int(self.broker.sync(name))
                self.synced[name] = (version, now)

    # -- the clusters move on; the tracker records what happened ----------------------------
    def _advance(self, now: float) -> None:
        self.env.sim.clock.advance_to(now)
        self.env.sim.tick()
        tracker = self.env.tracker
        tracker.pop_ends(now)
        changed = {n for n in self.seen if self._version(n) != self.seen[n]}
        for start in tracker.refresh(changed, now):
            tracker.accept(start)
        for name in changed:
            self.seen[name] = self._version(name)

    def _version(self, name: str) -> int:
        return self.env.view.clusters[name].version

    def _check_stuck(self, now: float) -> None:
        tracker = self.env.tracker
        if self.i < len(self.jobs) or tracker.next_end() is not None or self.broker.queue or not tracker.pending():
            self.stuck_since = math.inf
            return
        self.stuck_since = min(self.stuck_since, now)
        if now - self.stuck_since >= STUCK_LIMIT_S:
            waiting = [f"{c}: {j}" for c, jobs in sorted(tracker.waiting().items()) for j in jobs]
            raise ReplayStuck(
                f"after {STUCK_LIMIT_S / 3600:g} h with nothing running, {len(waiting)} job(s) still wait and never "
                f"can: {', '.join(waiting[:5])}"
            )

    def _busy(self) -> bool:
        tracker = self.env.tracker
        return tracker.next_end() is not None or tracker.pending() > 0 or bool(self.broker.queue)

    # -- arrivals ------------------------------------------------------------------------
    def _arrive(self, now: float) -> None:
        env, tracker = self.env, self.env.tracker
        while self.i < len(self.jobs) and self.jobs[self.i].submit_s <= now:
            job = self.jobs[self.i]
            self.i += 1
            if job.local:
                start = inject(env.view, tracker, job, env.seed, now)
                if start is not None:
                    tracker.accept(start)
                continue
            tracker.arrived(job)
            if job.total_gpus >= self.aging.big_gang_gpus:
                self.big.append(job.key)
            uid = self.broker.submit(job)
            self.keys[uid], self.uids[job.key] = job.key, uid
            self.submitted.append(job.submit_s)
            env.sim.set_duration(uid, job.duration_s, job.final_state)  # before it reaches a cluster
            self.gen += 1
        self._work(now)

    # -- beat ----------------------------------------------------------------------------
    def _beat(self, key: str, now: float) -> None:
        if key == "status":
            self._polls()
        elif key == "inventory":
            self._syncs(now)
        elif key == "withdraw-policy-holds":
            if not (self.skip.on and self.env.tracker.pending(local=False) == 0):
                self.gen += int(self.broker.withdraw_holds() > 0)
        elif key == "move-queued":
            if not (self.skip.on and self.env.tracker.pending(local=False) == 0):
                self.gen += int(self.broker.move_queued() > 0)
        elif key == "reconcile" and not (self.skip.on and self.gen == self.reconcile_gen and not self._expired(now)):
            self.reconcile_gen = self.gen
            self.gen += int(self.broker.reconcile())
        elif key == "broker-preempt":
            if self.preempt_after is not None and (not self.skip.on or self._preempt_due(now)):
                self.preempt_gen, self.preempt_at = self.gen, now
                self.gen += int(self.broker.preempt() > 0)
        elif key == "place-waiting" and not (
            self.skip.on
            and self.gen == self.pass_gen
            and not self._gang_past_hold_age(now)
            and not self._crossed_queue_age(now)
        ):
            self.pass_gen, self.pass_at = self.gen, now
            self.gen += int(self.broker.place_pass().placed > 0)

    def _polls(self) -> None:
        for name in self.broker.clusters:
            version = self._version(name)
            if self.skip.on and self.polled[name] == version:
                continue
            self.gen += int(self.broker.poll(name) > 0)
            self.polled[name] = version

    def _syncs(self, now: float) -> None:
        for name in self.broker.clusters:
            version = self._version(name)
            last, at = self.synced[name]
            # kept fresh by _freshen; but a report taken later counts the broker's jobs waiting
            # there otherwise (the GPUs promised since the report), so it is not elided then
            if self.skip.on and last == version and not self.env.tracker.pending_at(name):
                continue
            self.gen += int(self.broker.sync(name))
            self.synced[name] = (version, now)

    # -- the worker, and what it sent where ----------------------------------------------
    def _work(self, now: float) -> None:
        while self.broker.queue or self.recorder.events:
            self.gen += int(self.broker.work() > 0)
            self._record(now)

    def _record(self, now: float) -> None:
        tracker = self.env.tracker
        events, self.recorder.events[:] = list(self.recorder.events), []
        for what, cluster, job_id, uid in events:
            if what == "cancel":
                tracker.forget(cluster, job_id, now)
                continue
            key = self.keys.get(uid or "")
            if key is None:
                continue  # not one of this replay's workloads
            start = tracker.dispatched(key, cluster, job_id, now)
            if start is not None:
                tracker.accept(start)
