"""The baselines: plain scheduling rules on the simulator backend, no broker services.

* ``first-fit``: the first cluster in fleet order whose free GPUs of the job's class,
  *summed over nodes*, cover the job.  No packing check: a gang may be sent where the
  GPUs are free but scattered, and wait there (a fragmentation failure).
* ``onprem-first-nogang``: on-prem clusters before cloud ones, the one with the most
  summed free GPUs first; the same summed-free test, so no gang check either.
* ``multikueue-race``: MultiKueue's dispatch, generalised to every control plane: each
  eligible cluster gets a copy at once; the first copy to be admitted (start) wins and
  the others are withdrawn at that instant.  Copies admitted at the same instant are a
  tie, decided by the seeded RNG (MultiKueue takes whichever worker it hears from first).
* ``multikueue-incremental``: MultiKueue's Incremental dispatcher: the job is offered to
  worker clusters in a fixed order (on-prem first, then fleet order), a few more each
  round until one admits it; the first admission wins as in the race.  Kueue nominates
  up to 3 workers per 5-minute round; with a 3-cluster fleet that is the race, so the
  replay nominates one per round (``ROUND_SIZE``), which is the incremental idea.
* ``clairvoyant-fifo`` (``broker/replay/clairvoyant.py``): FIFO with known run times, built on
  these (a baseline, not a bound: the bound is ``broker/replay/lower_bound.py``).

The local queues themselves backfill (Slurm's backfill, Kueue's BestEffortFIFO): the
runner builds the simulated clusters with ``queueing="backfill"`` unless told otherwise.

All three know what a cluster could *ever* run (class, memory, node size, local quota
and QoS caps), so none sends a job where it can never start.  The first two hold jobs
that fit nowhere at the broker and retry them oldest-first, as the broker does.
"""

from __future__ import annotations

from typing import Sequence

from broker.backends.base import ProjectIdentity, Rejected
from broker.backends.simulator import SimulatorBackend
from broker.replay.jobs import ReplayJob
from broker.replay.loop import ReplayEnv
from broker.replay.simview import spec_for
from broker.replay.tracker import Start

WORKLOAD_PREFIX = "wl-replay-"


def identity_for_tenant(tenant: str) -> ProjectIdentity:
    account = f"replay-{tenant}"
    return ProjectIdentity(tenant=account, project=account, slurm_account=account, k8s_namespace=account)


class _Baseline:
    name = "baseline"

    def begin(self, env: ReplayEnv) -> None:
        self.env = env

    def step(self, now: float, arrivals: Sequence[ReplayJob]) -> tuple[list[Start], set[str]]:
        raise NotImplementedError

    def _submit(self, job: ReplayJob, cluster: str, now: float) -> tuple[str, Start | None] | None:
        """Create the destination job: (its id, its Start if it runs at once), or None
        when the cluster refused it."""
        workload_id = WORKLOAD_PREFIX + job.key
        self.env.sim.set_duration(workload_id, job.duration_s, job.final_state)
        backend = SimulatorBackend(cluster, fleet=self.env.sim)
        try:
            job_id = backend.submit(spec_for(job), workload_id, identity_for_tenant(job.tenant))
        except Rejected:
            self.env.tracker.rejected(job.key)
            return None
        return job_id, self.env.tracker.dispatched(job.key, cluster, job_id, now)

    def on_started(self, starts: Sequence[Start], now: float) -> set[str]:
        for start in starts:
            self.env.tracker.accept(start)
        return set()

    def finish(self, now: float) -> dict[str, int]:
        return {}


class _SummedFree(_Baseline):
    """Send each job to the first cluster, in ``order``, whose summed free GPUs cover it."""

    def begin(self, env: ReplayEnv) -> None:
        super().begin(env)
        self.waiting: list[ReplayJob] = []

    def order(self, job: ReplayJob) -> list[str]:
        raise NotImplementedError

    def step(self, now: float, arrivals: Sequence[ReplayJob]) -> tuple[list[Start], set[str]]:
        starts: list[Start] = []
        still: list[ReplayJob] = []
        for job in [*self.waiting, *arrivals]:
            if not self.env.view.eligible(job):
                continue  # can never run anywhere: never placed
            sent = self._place(job, now)
            if sent is None:
                still.append(job)  # nowhere now: wait at the broker
            elif sent[1] is not None:
                starts.append(sent[1])
        self.waiting = still
        return starts, set()

    def _place(self, job: ReplayJob, now: float) -> tuple[str, Start | None] | None:
        view = self.env.view
        for cluster in self.order(job):
            if view.summed_free(cluster, job) < job.total_gpus:
                continue
            sent = self._submit(job, cluster, now)
            if sent is not None:
                return sent
        return None

    def finish(self, now: float) -> dict[str, int]:
        return {"held at broker": len(self.waiting)}


class FirstFit(_SummedFree):
    name = "first-fit"

    def order(self, job: ReplayJob) -> list[str]:
        return self.env.view.eligible(job)


class OnpremFirstNoGang(_SummedFree):
    name = "onprem-first-nogang"

    def order(self, job: ReplayJob) -> list[str]:
        view = self.env.view
        eligible = view.eligible(job)
        return sorted(
            eligible, key=lambda c: (view.desc(c).location != "onprem", -view.summed_free(c, job), eligible.index(c))
        )


class MultiKueueRace(_Baseline):
    name = "multikueue-race"

    def begin(self, env: ReplayEnv) -> None:
        super().begin(env)
        self.copies: dict[str, list[tuple[str, str]]] = {}  # job -> (cluster, job id)

    def step(self, now: float, arrivals: Sequence[ReplayJob]) -> tuple[list[Start], set[str]]:
        touched: set[str] = set()
        for job in arrivals:
            starts: list[Start] = []
            for cluster in self.env.view.eligible(job):
                sent = self._submit(job, cluster, now)
                if sent is None:
                    continue
                self.copies.setdefault(job.key, []).append((cluster, sent[0]))
                if sent[1] is not None:
                    starts.append(sent[1])
            # admitted at once: decided before the next arrival, as the manager would
            touched |= self.on_started(starts, now)
        return [], touched

    def on_started(self, starts: Sequence[Start], now: float) -> set[str]:
        by_job: dict[str, list[Start]] = {}
        for start in starts:
            by_job.setdefault(start.key, []).append(start)
        touched: set[str] = set()
        for key, group in by_job.items():
            winner = group[0] if len(group) == 1 else self.env.rng.choice(group)
            self.env.tracker.accept(winner)
            started = {(s.cluster, s.job_id) for s in group}
            for cluster, job_id in self.copies.pop(key, []):
                if (cluster, job_id) != (winner.cluster, winner.job_id):
                    self.env.tracker.withdraw(cluster, job_id, (cluster, job_id) in started)
                    touched.add(cluster)
        return touched

    def finish(self, now: float) -> dict[str, int]:
        return {"copies left waiting": sum(len(v) for v in self.copies.values())}


ROUND_SIZE = 1  # workers nominated per round (Kueue: 3; see the module docstring)
ROUND_S = 300.0  # Kueue's round length: 5 minutes


class MultiKueueIncremental(MultiKueueRace):
    name = "multikueue-incremental"

    def begin(self, env: ReplayEnv) -> None:
        super().begin(env)
        # job -> (the job, clusters not yet nominated, when the next round is due)
        self.rounds: dict[str, tuple[ReplayJob, list[str], float]] = {}

    def order(self, job: ReplayJob) -> list[str]:
        view = self.env.view
        eligible = view.eligible(job)
        return sorted(eligible, key=lambda c: (view.desc(c).location != "onprem", eligible.index(c)))

    def next_wake(self) -> float | None:
        """The next round due: the loop wakes the strategy then, as Kueue's timer does."""
        return min((due for _, left, due in self.rounds.values() if left), default=None)

    def step(self, now: float, arrivals: Sequence[ReplayJob]) -> tuple[list[Start], set[str]]:
        for job in arrivals:
            self.rounds[job.key] = (job, self.order(job), now)
        touched: set[str] = set()
        for key in [k for k, (_, left, due) in self.rounds.items() if left and due <= now]:
            job, left, _ = self.rounds[key]
            self.rounds[key] = (job, left[ROUND_SIZE:], now + ROUND_S)
            starts: list[Start] = []
            for cluster in left[:ROUND_SIZE]:
                sent = self._submit(job, cluster, now)
                if sent is None:
                    continue
                self.copies.setdefault(key, []).append((cluster, sent[0]))
                if sent[1] is not None:
                    starts.append(sent[1])
            touched |= self.on_started(starts, now)
        return [], touched

    def on_started(self, starts: Sequence[Start], now: float) -> set[str]:
        for start in starts:
            self.rounds.pop(start.key, None)  # admitted: no more rounds
        return super().on_started(starts, now)


BASELINES: dict[str, type[_Baseline]] = {
    cls.name: cls for cls in (FirstFit, OnpremFirstNoGang, MultiKueueRace, MultiKueueIncremental)
}
