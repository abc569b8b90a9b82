"""The production-loop replay: its shortcuts change no decision, and what it costs per job.

    .venv/bin/python bench/bench_replay_loop.py [--jobs 500] [--trace CSV --half first --compress 5]
        [--policy default] [--seed 11] [--no-reference]

Replays the same jobs twice through one broker preset in the production loop
(``broker/replay/production.py``): once with every beat entry run at every tick (the
reference), once with the harness's shortcuts (elided syncs and polls, skipped passes, idle
ticks passed over), and compares every broker job's decision (cluster, start, dispatch
instant, copies, refusals) and every local job's start.  Then it states the CPU seconds of
process time per replayed GPU job (local ones included) of the run with shortcuts, against
the issue's 0.1.

Without ``--trace`` the jobs are a busy synthetic slice on the demo fleet (arrivals every
0-90 s, runs of 5-60 minutes, a gang in five); with it, the first ``--jobs`` replayable jobs
of that half of the trace.  It runs in a throwaway SQLite database of its own.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
DB = Path(tempfile.mkdtemp(prefix="bench-replay-")) / "db.sqlite3"
os.environ["DATABASE_URL"] = f"sqlite:///{DB}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from broker.fleet_file import load_fleet  # noqa: E402
from broker.replay.jobs import ReplayJob, TimeOptions  # noqa: E402
from broker.replay.local_jobs import DEFAULT_LOCAL_SHARE, mark_local  # noqa: E402
from broker.replay.production import Skipping  # noqa: E402
from broker.replay.runner import ReplayConfig, load_jobs, replay_run  # noqa: E402
from broker.replay.synth import SynthOptions  # noqa: E402


def synthetic(n: int, seed: int) -> list[ReplayJob]:
    rng = random.Random(seed)
    jobs, at = [], 0.0
    for i in range(n):
        at += float(rng.randint(0, 90))
        gang = i % 5 == 4
        jobs.append(
            ReplayJob(
                key=f"j{i:04d}",
                submit_s=at,
                tenant=f"t{i % 4}",
                gpu_class="a100-80gb",
                min_memory_gb=80,
                gpus_per_worker=rng.choice([2, 4, 8]) if gang else rng.choice([1, 2, 4, 8]),
                workers=2 if gang else 1,
                duration_s=float(rng.randint(5, 60) * 60),
            )
        )
    return mark_local(jobs, DEFAULT_LOCAL_SHARE, seed)


def from_trace(args: argparse.Namespace) -> list[ReplayJob]:
    config = ReplayConfig(
        trace=Path(args.trace),
        fleet=Path(str(settings.GPUBROKER_FLEET_FILE)),
        synth=SynthOptions(seed=args.seed),
        time=TimeOptions(time_compress=args.compress),
        window=args.half,
    )
    return load_jobs(config)[1][: args.jobs]


def decisions(run) -> tuple[dict, dict]:
    ours = {k: (o.cluster, o.start_s, o.dispatched_s, o.copies, o.rejected) for k, o in run.outcomes.items()}
    local = {k: (o.cluster, o.start_s) for k, o in run.local_outcomes.items()}
    return ours, local


def timed(policy: str, jobs, fleet, seed: int, on: bool):
    began, wall = time.process_time(), time.perf_counter()
    run = replay_run(policy, jobs, fleet, seed=seed, skipping=Skipping(on=on))
    return run, time.process_time() - began, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--trace", default="")
    parser.add_argument("--half", default="first", choices=("first", "second", "all"))
    parser.add_argument("--compress", type=float, default=5.0)
    parser.add_argument("--policy", default="default")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--no-reference", action="store_true", help="only the run with shortcuts (its CPU)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    jobs = from_trace(args) if args.trace else synthetic(args.jobs, args.seed)
    fleet = load_fleet(Path(str(settings.GPUBROKER_FLEET_FILE)))
    local = sum(j.local for j in jobs)
    print(f"{len(jobs)} jobs ({local} local), {args.policy}, seed {args.seed}, {args.trace or 'synthetic'}")
    fast, cpu, wall = timed(args.policy, jobs, fleet, args.seed, on=True)
    waited = sum(1 for o in fast.outcomes.values() if o.start_s is not None and o.start_s > o.job.submit_s)
    print(f"with shortcuts: {cpu:.1f} CPU-s ({wall:.1f} s wall), {cpu / len(jobs):.3f} CPU-s per job (goal <= 0.1); "
          f"{waited} of {len(fast.outcomes)} broker jobs waited; simulated span {fast.end_s / 3600:.1f} h")
    if args.no_reference:
        return 0
    every, cpu_ref, wall_ref = timed(args.policy, jobs, fleet, args.seed, on=False)
    print(f"every tick:     {cpu_ref:.1f} CPU-s ({wall_ref:.1f} s wall)")
    ours_fast, local_fast = decisions(fast)
    ours_ref, local_ref = decisions(every)
    differ = sorted(k for k in ours_ref if ours_ref[k] != ours_fast.get(k))
    differ_local = sorted(k for k in local_ref if local_ref[k] != local_fast.get(k))
    print(f"decisions that differ: {len(differ)} of {len(ours_ref)} broker jobs, "
          f"{len(differ_local)} of {len(local_ref)} local starts")
    for key in differ[:10]:
        print(f"  {key}: every tick {ours_ref[key]}, with shortcuts {ours_fast.get(key)}")
    return 1 if differ or differ_local else 0


if __name__ == "__main__":
    raise SystemExit(main())
