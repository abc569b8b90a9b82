"""Slurm's backfill plan, as ``sched/backfill`` keeps it: every waiting job it looks at, in
queue order, gets the earliest start its gang packs at once running jobs end at their
*time limits* and once the jobs planned before it have had their turn, and those GPUs are
held for it then.  A job starts now only on GPUs no planned job needs before it would end
by its own limit.

The calibration against real Slurm (docs/simulator.md) showed why: with one reservation per
pool set (EASY backfill, what the simulator did before), a short job took the GPUs that
the second and third waiting jobs were planned on, and started up to a minute before real
Slurm started it.

One plan per scheduling pass, over the nodes of one cluster.  ``MAX_PLANNED`` bounds the
work a pass does (Slurm bounds it too, with ``bf_max_job_test``): later waiting jobs may
still start now on GPUs no plan holds, but hold nothing themselves.  20: the calibrations'
decisions are the same with 20, 30 and 100 (at most about 25 jobs wait there at once), and
a long queue (the fault harness's drain, the replays) stays cheap.
"""

from __future__ import annotations

from typing import Callable, Sequence

from broker.backends.sim.model import SimJob, SimNode
from broker.backends.sim.placement import Placement, pack

MAX_PLANNED = 20
LimitFn = Callable[[SimJob], float]  # a job's time limit on the cluster's clock


class Plan:
    def __init__(self, nodes: Sequence[SimNode], running: Sequence[SimJob], now: float, limit: LimitFn) -> None:
        self.now, self.limit = now, limit
        self.size = {n.name: (n.gpus if n.usable else 0) for n in nodes}
        # per node: (end by its limit, GPUs) of what runs there, and what is planned there
        self.ends: dict[str, list[tuple[float, int]]] = {}
        for job in running:
            end = max(now, (job.started_at if job.started_at is not None else now) + limit(job))
            for node, gpus in job.placement:
                self.ends.setdefault(node, []).append((end, gpus))
        self.held: dict[str, list[tuple[float, float, int]]] = {}  # node -> (start, end, GPUs)
        self.planned = 0  # jobs held so far in this pass

    def allows(self, job: SimJob, placement: Placement) -> bool:
        """Starting ``job`` now on ``placement`` leaves every planned job its GPUs."""
        if not self.planned:
            return True
        end = self.now + self.limit(job)
        return all(gpus <= self._room(node, self.now, end) for node, gpus in placement)

    def place_now(self, job: SimJob, nodes: Sequence[SimNode]) -> Placement | None:
        """Where ``job`` could start now without taking a planned job's GPUs (and on GPUs
        free now: the plan's room is what its own bookkeeping leaves)."""
        room = self._rooms(nodes, self.now, self.now + self.limit(job))
        return pack(nodes, job.request, _lookup({n.name: min(room[n.name], n.free) for n in nodes}))

    def started(self, job: SimJob) -> None:
        """A job started in this pass holds its GPUs until its limit, as the jobs that ran
        when the pass began: the holds and starts after it in the pass count them."""
        end = self.now + self.limit(job)
        for node, gpus in job.placement:
            self.ends.setdefault(node, []).append((end, gpus))

    def hold(self, job: SimJob, nodes: Sequence[SimNode]) -> None:
        """Plan ``job`` at its earliest start after what is planned; nothing when no instant
        in view packs it (its nodes unusable, or its limit unknown), or the plan is full."""
        length = self.limit(job)
        if self.planned >= MAX_PLANNED or length == float("inf"):
            return
        if not any(n.free for n in nodes):
            return  # none of its GPUs free now: nothing starts there in this pass, none to protect
        names = {n.name for n in nodes}
        instants = {self.now}
        for name in names:
            instants.update(e for e, _ in self.ends.get(name, ()))
            instants.update(e for _, e, _ in self.held.get(name, ()))
        need = job.request.total_gpus
        for at in sorted(t for t in instants if t >= self.now):
            room = self._rooms(nodes, at, at + length)
            if sum(room.values()) < need:
                continue  # not enough GPUs then, however placed
            found = pack(nodes, job.request, _lookup(room))
            if found is not None:
                for node, count in found:
                    self.held.setdefault(node, []).append((at, at + length, count))
                self.planned += 1
                return

    def _rooms(self, nodes: Sequence[SimNode], start: float, end: float) -> dict[str, int]:
        """Each node's room through [start, end], worked out once for a whole packing."""
        return {n.name: self._room(n.name, start, end) for n in nodes}

    def _room(self, node: str, start: float, end: float) -> int:
        """GPUs of ``node`` free through [start, end]: its size less what runs there (until
        its limit) and what is planned there, at the busiest instant of that span."""
        size = self.size.get(node, 0)
        if size == 0:
            return 0
        held = self.held.get(node, ())
        ends = self.ends.get(node, ())
        busiest = 0
        # closed at its end, as Slurm checks it: a job whose limit runs out at the instant a
        # planned job starts would delay it (the calibration's j08 waited for exactly this)
        for t in {start, *(s for s, _, _ in held if start < s <= end)}:
            used = sum(g for e, g in ends if e > t) + sum(g for s, e, g in held if s <= t < e)
            busiest = max(busiest, used)
        return max(0, size - busiest)


def _lookup(room: dict[str, int]) -> Callable[[SimNode], int]:
    """``pack`` asks a node's free GPUs of a function: the room worked out beforehand."""
    return lambda node: room[node.name]
