"""A quick probe of the default preset's policy keys on one FIRST-half cell, against the race.

    .venv/bin/python bench/replay_knob_probe.py TRACE --load 0.9 [--seed 11]
        [--policies default,multikueue-race] [--knobs '{"aging_queue_after_s": 0}']

One trace's first half (the tuning half; the second is the report's, and no option reaches it), x5,
scaled to one target on-prem load, one seed: each policy's mean, p95 and gang p95 wait, cloud
spend and waits per gang shape, and for ``default`` how often each audited action happened
(how many moves and holds). ``--knobs`` sets knobs (``broker/replay/knobs.py``; an unknown
one is an error) over the tuned ones (``broker/replay/tuned_default.json``) before the run. One seed says which way a key
pushes, not what it is worth: the knobs the report replays are chosen on several cells, and
the second halves judge them (``docs/replay.md``). It runs in a throwaway database of its own.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
DB = Path(tempfile.mkdtemp(prefix="bench-probe-")) / "db.sqlite3"
os.environ["DATABASE_URL"] = f"sqlite:///{DB}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db.models import Count  # noqa: E402

from broker.fleet_file import load_fleet  # noqa: E402
from broker.models import AuditRecord  # noqa: E402
from broker.replay.jobs import TimeOptions  # noqa: E402
from broker.replay.knobs import KNOBS_FILE, Knobs, read_knobs  # noqa: E402
from broker.replay.metrics import Metrics, compute  # noqa: E402
from broker.replay.runner import ReplayConfig, load_jobs, replay_run  # noqa: E402
from broker.replay.synth import SynthOptions  # noqa: E402
from broker.replay.target_load import scale_to_load  # noqa: E402


def line(m: Metrics) -> str:
    shapes = ", ".join(f"{k}: n {v[0]} p95 {v[2] / 60:.0f}" for k, v in sorted(m.by_gang_shape.items()))
    return (
        f"{m.policy}: mean {m.mean_wait_s / 60:.1f} min, p95 {m.p95_wait_s / 60:.1f}, gang p95 "
        f"{m.p95_gang_wait_s / 60:.1f}, cloud spend {m.cloud_spend:.0f}; gangs {{{shapes}}}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--load", type=float, required=True)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--policies", default="default,multikueue-race")
    parser.add_argument("--knobs", type=json.loads, default={}, help="knobs over the tuned ones (JSON)")
    args = parser.parse_args()
    try:
        knobs = Knobs.from_dict({**asdict(read_knobs(KNOBS_FILE)), **args.knobs})
    except (TypeError, ValueError) as exc:
        parser.error(f"--knobs: {exc}")
    call_command("migrate", verbosity=0)
    config = ReplayConfig(
        trace=args.trace,
        fleet=Path(settings.GPUBROKER_FLEET_FILE),
        synth=SynthOptions(seed=args.seed),
        time=TimeOptions(time_compress=5),
        window="first",  # the tuning half, never the report's
        knobs=knobs,
        target_load=args.load,
    )
    _, jobs, _, _ = load_jobs(config)
    scaling = scale_to_load(jobs, load_fleet(config.fleet), args.load)
    print(scaling.describe())
    for name in args.policies.split(","):
        began = time.process_time()
        run = replay_run(name, jobs, scaling.fleet, args.seed, knobs=knobs if name == "default" else None)
        print(f"{line(compute(run, scaling.fleet))} ({time.process_time() - began:.0f} CPU-s)")
        if name == "default":
            counts = AuditRecord.objects.values("action").annotate(n=Count("id")).values_list("action", "n")
            print("   audited:", {a: n for a, n in counts if a.startswith(("workload.moved", "placement.hold"))})


if __name__ == "__main__":
    main()
