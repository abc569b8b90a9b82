"""Test tooling: the exhaustive optimum of a small instance, to hold the lower bound against.

An instance is a few gangs (arrival, workers x GPUs per worker, run time, GPU class) and a
small fleet of nodes, each with some GPUs of one class.  A gang's workers each take
``gpus_per_worker`` GPUs of one node of its class, for the whole run; workers of one gang
may share a node that has room (as the simulator packs gangs, broker/backends/sim/placement.py).

For one job order, the list schedule places the jobs one after the other, each at the
earliest instant at or after its arrival at which its gang fits for its whole run beside the
jobs placed before it (it may start before an earlier-placed job: holes are used); its
workers go to the nodes of its class with the least room first.  ``optimum`` is the least
mean wait over every job order.  Every such schedule is feasible, so a true lower bound must
lie at or below it.  (It is an upper bound on the true optimum: with one node per class it is
the optimum over active schedules, which hold an optimal one; with several nodes the
least-room-first packing is one choice among several.)
"""

from __future__ import annotations

from dataclasses import dataclass

Usage = tuple[float, float, int, int]  # (start, end, node, GPUs): one gang's share of a node


@dataclass(frozen=True)
class Gang:
    arrival_s: float
    gpus_per_worker: int
    workers: int
    run_s: float
    gpu_class: str

    @property
    def gpus(self) -> int:
        return self.gpus_per_worker * self.workers


@dataclass(frozen=True)
class Node:
    gpu_class: str
    gpus: int


def _room(nodes: list[Node], placed: list[Usage], node: int, start: float, end: float) -> int:
    """GPUs of ``node`` free for the whole of [start, end): its use peaks at ``start`` or at
    a later start inside the stretch."""
    here = [u for u in placed if u[2] == node and u[0] < end and u[1] > start]
    peaks = [start] + [u[0] for u in here if u[0] > start]
    used = max((sum(u[3] for u in here if u[0] <= t < u[1]) for t in peaks), default=0)
    return nodes[node].gpus - used


def _fit(gang: Gang, nodes: list[Node], placed: list[Usage], start: float) -> list[Usage] | None:
    """The gang's shares of nodes if it fits from ``start`` for its run, else None."""
    end = start + gang.run_s
    ours = [n for n, node in enumerate(nodes) if node.gpu_class == gang.gpu_class]
    rooms = [(_room(nodes, placed, n, start, end), n) for n in ours]
    shares, left = [], gang.workers
    for room, n in sorted(rooms):  # least room first: keeps the big holes for later gangs
        take = min(left, room // gang.gpus_per_worker)
        if take:
            shares.append((start, end, n, take * gang.gpus_per_worker))
            left -= take
    return shares if left == 0 else None


def place(gang: Gang, nodes: list[Node], placed: list[Usage]) -> tuple[float, list[Usage]]:
    """The earliest start at or after arrival where the gang fits, and its shares.  Only the
    arrival and the ends of placed gangs need trying: between two such instants no GPU frees."""
    ends = sorted({u[1] for u in placed if u[1] > gang.arrival_s})
    for start in [gang.arrival_s, *ends]:
        shares = _fit(gang, nodes, placed, start)
        if shares is not None:
            return start, shares
    raise ValueError(f"{gang}: it fits on no node set of class {gang.gpu_class!r} even when idle")


def optimum(gangs: list[Gang], nodes: list[Node]) -> float:
    """The least mean wait over every job order's list schedule (branch and bound over the
    orders: a partial order whose waits already sum to the best total is cut, waits being
    at least 0)."""
    best = [float("inf")]

    def branch(left: tuple[int, ...], placed: list[Usage], waited: float) -> None:
        if waited >= best[0]:
            return
        if not left:
            best[0] = waited
            return
        for k, i in enumerate(left):
            start, shares = place(gangs[i], nodes, placed)
            branch(left[:k] + left[k + 1 :], placed + shares, waited + start - gangs[i].arrival_s)

    branch(tuple(range(len(gangs))), [], 0.0)
    return best[0] / len(gangs) if gangs else 0.0
