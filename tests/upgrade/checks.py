"""What an upgrade or a rollback must keep, as counts that must all be zero (the fault
harness's way: a count names the problem, its examples show where). Compares two snapshots
(scripts/snapshot.py) of one database, taken by the release before and the release after."""

from __future__ import annotations

from collections import defaultdict

ENDED = {"completed", "failed", "cancelled", "rejected"}
LIVE_RESERVATION = {"active", "confirmed"}
SENT_ATTEMPT = {"accepted", "adopted"}
# the tables whose rows nothing in an upgrade may remove
KEPT = ("workloads", "reservations", "attempts", "escalations", "usage", "bills", "bill_lines", "quotas", "clusters",
        "audit")
COUNTS = ("lost_rows", "ended_workloads_changed", "ledger_changed", "duplicate_destination_jobs",
          "stranded_reservations", "chargeback_changed", "previous_release_writes_refused", "worker_errors")


def problems(before: dict, after: dict, *, month: str, refused_writes: dict[str, str] | None = None,
             worker_errors: list[str] | None = None) -> dict[str, list[str]]:
    """Every problem by its count's name; no entry: none of that kind."""
    found: dict[str, list[str]] = defaultdict(list)
    for table in KEPT:
        for row_id in sorted(set(before[table]) - set(after[table]), key=int):
            found["lost_rows"].append(f"{table} {row_id}: {before[table][row_id]}")
    for row_id, (uid, state, *_rest) in before["workloads"].items():
        now = after["workloads"].get(row_id)
        if state in ENDED and now is not None and now[1] != state:
            found["ended_workloads_changed"].append(f"workload {uid}: {state} -> {now[1]}")
    for table in ("usage", "bill_lines", "bills"):
        for row_id, row in before[table].items():
            if row_id in after[table] and after[table][row_id] != row:
                found["ledger_changed"].append(f"{table} {row_id}: {row} -> {after[table][row_id]}")
    found["duplicate_destination_jobs"] += _duplicates(after)
    for row_id, (workload_id, state, _gpus) in after["reservations"].items():
        workload = after["workloads"].get(workload_id)
        if state in LIVE_RESERVATION and workload is not None and workload[1] in ENDED:
            found["stranded_reservations"].append(
                f"reservation {row_id} {state} of {workload[1]} workload {workload_id}")
    was, now = before["chargeback"].get(month), after["chargeback"].get(month)
    if was != now:
        found["chargeback_changed"].append(f"{month}: {was} -> {now}")
    found["previous_release_writes_refused"] += [f"{k}: {v}" for k, v in sorted((refused_writes or {}).items())]
    found["worker_errors"] += list(worker_errors or [])
    return {k: v for k, v in found.items() if v}


def _duplicates(snapshot: dict) -> list[str]:
    """Destination jobs beyond the first for one workload, or one job claimed by two workloads."""
    sent: dict[str, int] = defaultdict(int)
    for workload_id, state, _job in snapshot["attempts"].values():
        if state in SENT_ATTEMPT:
            sent[workload_id] += 1
    out = [f"workload {w}: {n} accepted dispatch attempts" for w, n in sorted(sent.items()) if n > 1]
    claims: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row_id, (_uid, _state, cluster_id, job) in snapshot["workloads"].items():
        if job:
            claims[(cluster_id, job)].append(row_id)
    out += [f"job {job} on cluster {c}: workloads {ids}" for (c, job), ids in sorted(claims.items()) if len(ids) > 1]
    return out


def table(found: dict[str, list[str]]) -> str:
    """The counts, then up to three examples of each problem: the failure message."""
    lines = [f"{name:<34} {len(found.get(name, [])):>4}" for name in COUNTS]
    for name, examples in found.items():
        lines += [f"  {name}: {x[:400]}" for x in examples[:3]]
    return "\n".join(lines)
