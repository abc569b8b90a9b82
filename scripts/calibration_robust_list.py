#!/usr/bin/env python3
"""How much a calibration job list's start order hangs on the real control plane's lag, and
a generator of lists whose order does not.

A deterministic simulator can only agree with a real scheduler as well as the real scheduler
agrees with itself; on a busy two-core machine Kueue admits a new Workload 0-3 s late and
its pods run 0-2 s late, and a list where an arrival, an end and an eviction fall within
that lag of each other starts in a different order on each run (docs/simulator.md, "The
real scheduler against itself").  This plays a list on the simulator built from a recorded
run's inventory, then again with each job's arrival and end moved late by a random lag, and
reports how far the jittered plays agree with the steady one (pairs in the same order,
median start error), the same comparison as a calibration's.

    .venv/bin/python scripts/calibration_robust_list.py score LIST.json RECORDED.json [--plays 12]
    .venv/bin/python scripts/calibration_robust_list.py generate RECORDED.json OUT.json --seeds 200

``generate`` draws candidate lists for the recorded run's control plane and keeps the one
whose worst jittered play agrees best, among those contended as the CI test asks.  Kueue:
shapes 1-8 GPUs, gangs of two, a third local, three high-priority jobs, one past its limit,
two cancellations, arrivals 1-4 s apart; 30% wait, a preemption, the broker's queue past its
nominal quota.  Volcano: ``volcano_candidate``; 40% wait, a gang among them, the gang past
the broker queue's capability waits by rule."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from broker.calibration.compare import compare  # noqa: E402
from broker.calibration.jobs import JobList, load, parse  # noqa: E402
from broker.calibration.played import Played  # noqa: E402
from broker.calibration.simulated import (  # noqa: E402
    inventory_from_json,
    play,
    simulator_for_kueue,
    simulator_for_volcano,
)

CYCLE_S = 2.0
ARRIVAL_LAG_S = 3.0  # a new Workload's evaluation, 0-3 s on the CI machine
START_LAG_S = 2.0  # an admitted Workload's pods ready, 0-2 s
NOMINAL_GPUS = 8  # calib-cq's own a100 + h100 quota


def played(recorded: dict, jobs: JobList) -> Played:
    """The list on the simulator built from the recorded run's inventory, in its queues."""
    snapshot = inventory_from_json(recorded["inventory"])
    queue, local = recorded["partition"], recorded["local_queue"]
    if recorded["control_plane"].startswith("volcano"):
        sim = simulator_for_volcano(snapshot, [queue, local], recorded["pool"])
    else:
        sim = simulator_for_kueue(snapshot, [queue, local])
    return play(sim, jobs, [float(t) for t in range(400)], queue=queue, local_queue=local)


def jittered(jobs: JobList, rng: random.Random) -> JobList:
    out = []
    for j in jobs.jobs:
        lag = rng.uniform(0, ARRIVAL_LAG_S)
        cancel = None if j.cancel_at_s is None else max(j.cancel_at_s + rng.uniform(0, 1.0), j.at_s + lag + 0.1)
        out.append(replace(j, at_s=j.at_s + lag, run_s=j.run_s + rng.uniform(0, START_LAG_S), cancel_at_s=cancel))
    return replace(jobs, jobs=tuple(out))


def score(recorded: dict, jobs: JobList, plays: int, seed: int = 7) -> tuple[float, float, float]:
    """(worst pairs, median pairs, worst median error) of jittered plays against the steady one."""
    steady = played(recorded, jobs)
    rng = random.Random(seed)
    got = [compare(played(recorded, jittered(jobs, rng)), steady, cycle_s=CYCLE_S) for _ in range(plays)]
    pairs = [a.pair_order for a in got]
    return min(pairs), statistics.median(pairs), max(a.median_abs_error_s for a in got)


def contended(steady: Played, jobs: JobList) -> bool:
    waited = sum(1 for o in steady.jobs.values() if (o.started_s or 1e9) - o.submitted_s >= CYCLE_S)
    if waited < 0.4 * len(jobs.jobs) or sum(o.preempted for o in steady.jobs.values()) < 1:
        return False
    gpus = {j.name: j.gpus for j in jobs.jobs if not j.local}
    for o in steady.jobs.values():
        at = o.started_s
        if at is None:
            continue
        running = sum(
            g
            for n, g in gpus.items()
            if (s := steady.jobs[n]).started_s is not None
            and s.started_s <= at
            and (s.ended_s is None or s.ended_s > at)
        )
        if running > NOMINAL_GPUS:
            return True
    return False


SHAPES = [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2), (8, 1)]


def candidate(seed: int) -> JobList:
    rng = random.Random(seed)
    raw, at = [], 0.0
    high = set(rng.sample(range(8, 30), 3))
    cancelled = set(rng.sample(range(4, 28), 2))
    timeout = rng.choice([i for i in range(3, 20) if i not in high | cancelled])
    for i in range(32):
        gpw, workers = rng.choice(SHAPES)
        local = i not in high and rng.random() < 0.33
        prefix = "h" if i in high else "l" if local else "b"
        job = {
            "name": f"{prefix}{i + 1:02d}",
            "at_s": round(at),
            "gpus_per_worker": 4 if i in high else gpw,
            "workers": 1 if i in high else workers,
            "run_s": 75 if i == timeout else rng.randint(6, 16),
            "time_limit_min": 1,
        }
        if local:
            job["local"] = True
        if i in high:
            job["priority"] = "high"
        if i in cancelled:
            job["cancel_at_s"] = round(at) + rng.choice([5, 7, 9])
        raw.append(job)
        at += rng.choice([1, 2, 2, 3, 3, 4])
    return parse({"name": f"kueue-steady-16gpu-seed{seed}", "jobs": raw})


VOLCANO_SHAPES = [(1, 1), (2, 1), (4, 1), (1, 2), (2, 2), (4, 2), (1, 4), (2, 3)]
VOLCANO_CAPABILITY = 8  # calib-v's GPUs (volcano-calib-profile.yaml)


def volcano_candidate(seed: int) -> JobList:
    """36 jobs on the Volcano profile's 16 GPUs: gangs of 2-4 workers and single pods, 40%
    local, runs 5-15 s under their 1-minute limits (kwok enforces none), one 12-GPU gang past
    the broker queue's capability (cancelled 14 s after it comes), two more cancellations."""
    rng = random.Random(seed)
    raw, at = [], 0.0
    over = rng.choice(range(6, 12))
    cancelled = set(rng.sample([i for i in range(4, 30) if i != over], 2))
    for i in range(36):
        gpw, workers = (4, 3) if i == over else rng.choice(VOLCANO_SHAPES)
        local = i != over and rng.random() < 0.4
        job = {
            "name": f"{'l' if local else 'b'}{i + 1:02d}",
            "at_s": round(at),
            "gpus_per_worker": gpw,
            "workers": workers,
            "run_s": rng.randint(5, 15),
            "time_limit_min": 1,
        }
        if local:
            job["local"] = True
        if i == over:
            job["cancel_at_s"] = round(at) + 14
        elif i in cancelled:
            job["cancel_at_s"] = round(at) + rng.choice([4, 6, 8])
        raw.append(job)
        at += rng.choice([1, 1, 2, 2, 3])
    return parse({"name": f"volcano-steady-16gpu-seed{seed}", "jobs": raw})


def volcano_contended(steady: Played, jobs: JobList) -> bool:
    """40% wait, a gang among them, and the gang past the capability waits by rule, never runs."""
    waited = [n for n, o in steady.jobs.items() if (o.started_s or 1e9) - o.submitted_s >= CYCLE_S]
    gangs = {j.name for j in jobs.jobs if j.workers > 1}
    over = [j.name for j in jobs.jobs if not j.local and j.gpus > VOLCANO_CAPABILITY]
    reasons = {(n, r) for at in steady.reasons.values() for n, r in at.items()}
    return (
        len(waited) >= 0.4 * len(jobs.jobs)
        and bool(gangs.intersection(waited))
        and all((n, "policy") in reasons and steady.jobs[n].started_s is None for n in over)
    )


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("jobs")
    s.add_argument("recorded")
    s.add_argument("--plays", type=int, default=12)
    g = sub.add_parser("generate")
    g.add_argument("recorded")
    g.add_argument("out")
    g.add_argument("--seeds", type=int, default=200)
    g.add_argument("--first-seed", type=int, default=0)
    g.add_argument("--plays", type=int, default=12)
    a = p.parse_args()
    if a.cmd == "score":
        recorded = json.loads(Path(a.recorded).read_text())
        worst, median, error = score(recorded, load(Path(a.jobs)), a.plays)
        print(f"jittered plays: pairs worst {worst:.2f}, median {median:.2f}; worst median error {error:.1f} s")
        return
    recorded = json.loads(Path(a.recorded).read_text())
    best: tuple[float, int] | None = None
    volcano = recorded["control_plane"].startswith("volcano")
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        jobs = volcano_candidate(seed) if volcano else candidate(seed)
        if not (volcano_contended if volcano else contended)(played(recorded, jobs), jobs):
            continue
        worst, median, error = score(recorded, jobs, a.plays)
        print(f"seed {seed}: worst {worst:.3f} median {median:.3f} error {error:.1f}", flush=True)
        if best is None or worst > best[0]:
            best = (worst, seed)
    assert best is not None, "no candidate was contended"
    print(f"best: seed {best[1]}, worst jittered pairs {best[0]:.3f}")
    print(json.dumps(best), file=sys.stderr)
    Path(a.out).write_text(json.dumps({"seed": best[1]}) + "\n")


if __name__ == "__main__":
    main()
