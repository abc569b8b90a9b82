"""The tables of docs/reliability.md's compose-stack runs, from their committed results:

    python -m tests.ops.stack.report docs/reliability/stack-*.json
"""

from __future__ import annotations

import json
import sys


def kills(r: dict) -> list[str]:
    faults = ", ".join(f["fault"] + (" mid-chunk" if f.get("mid_chunk") else "") for f in r["faults"])
    c = r["counts"]
    return [
        f"run at {r['commit'][:7]}{' (tree differed)' if r['tree_differs'] else ''}, {r['date']}, {r['slurm']}, "
        f"arguments {r['arguments'] or 'defaults'}: {r['researchers']} researchers for {r['load_s']:.0f} s; {faults}",
        "",
        "| requests | retried | acknowledged (201) | in the database | lost | Slurm jobs "
        "| workloads with a job | duplicated |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {r['requests']} | {r['failed_requests_retried']} | {r['acknowledged']} | {r['in_database']} | {r['lost']} "
        f"| {r['slurm_jobs']} | {r['slurm_workloads']} | {c['duplicate_destination_jobs']} |",
        "",
        "| invariant | count |",
        "|---|---:|",
        # "errors" counts exceptions the in-process harness catches in tasks; the watcher
        # cannot see the stack's workers, so it is left out here rather than shown as 0
        *[f"| {r['labels'][k]} | {v} |" for k, v in c.items() if k != "errors"],
        "",
        f"end states: {r['states']}; containers the engine restarted by itself (restart policy): "
        f"{r.get('restarted_by_the_engine', 'not recorded')}",
    ]


def outage(r: dict) -> list[str]:
    return [
        f"run at {r['commit'][:7]}{' (tree differed)' if r['tree_differs'] else ''}, {r['date']}, {r['slurm']}, "
        f"arguments {r['arguments'] or 'defaults'}",
        "",
        "| outage | jobs (s) | ended on Slurm during it | lag shown (metrics, /fleet/) "
        "| workers back to: first reconcile | ends recorded | charged |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {r['outage_s']:.0f} s | {r['jobs']} x {r['job_s']} s "
        f"| after {r['jobs_ended_on_slurm_during_outage_after_s']} s "
        f"| {r['reconcile_lag_before_workers_restart_s']:.0f} s, {r['reconcile_lag_on_fleet_page_s']} s "
        f"| {r['workers_restart_to_first_reconcile_s']} s | {r['workers_restart_to_ends_recorded_s']} s "
        f"| {r['workers_restart_to_charged_s']} s ({r['charged_gpu_hours']} GPU-h) |",
    ]


def main(paths: list[str]) -> int:
    for path in paths:
        r = json.load(open(path))
        print(f"#### {path}\n")
        print("\n".join(kills(r) if "faults" in r else outage(r)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
