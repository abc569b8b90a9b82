"""The fault harness's invariant counters, over a running stack: run on this host as its own
process (`python -m tests.ops.stack.watch`), reading the stack's database over the compose
network and the real Slurm cluster's squeue and sacct. It checks after every change (every
2 s) until the file named by --stop appears, then drains and prints the final counts as JSON.

A restart of the stack's PostgreSQL makes a check fail, and gives the database container a new
address: that round is skipped and counted, and the address looked up again (--db-container)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cluster", required=True)
    p.add_argument("--stop", required=True, help="finish once this file exists")
    p.add_argument("--out", required=True)
    p.add_argument("--db-container", required=True, help="its address is looked up again after a failure")
    args = p.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.db import OperationalError, InterfaceError, connections

    from broker.faults.invariants import CHECKS, INVARIANTS, InvariantWatch
    from broker.faults.truth import SlurmTruth

    def readdress() -> None:
        connections.close_all()
        address = "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"
        out = subprocess.run(["podman", "inspect", "--format", address, args.db_container],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        if out:
            connections["default"].settings_dict["HOST"] = out

    watch = InvariantWatch(SlurmTruth(args.cluster, datetime.now(timezone.utc)))
    rounds = skipped = 0
    while not os.path.exists(args.stop):
        try:
            watch.after_step(unreachable=set(), step=f"t={time.time():.0f}", force=True)
            rounds += 1
        except (OperationalError, InterfaceError):
            skipped += 1
            readdress()
        time.sleep(2)
    for attempt in range(10):
        try:
            counts = watch.final()
            break
        except (OperationalError, InterfaceError):
            if attempt == 9:
                raise
            readdress()
            time.sleep(3)
    jobs = watch.truth.all_jobs()
    result = {"counts": counts, "slurm_jobs": len(jobs),
              "slurm_workloads": len({j.workload_id for j in jobs}), "labels": dict(INVARIANTS + CHECKS),
              "rounds": rounds, "skipped_rounds": skipped,
              "examples": {k: v for k, v in watch.examples.items() if v}}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
