"""Fleet-wide reads for the overview and cluster pages (scoped: members of any tenant)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from statistics import mean
from typing import cast


from broker.lifecycle import WAITING_STATES
from broker.elastic_pools import registered_pools
from broker.models import AuditRecord, Cluster, ClusterHealth, GpuPool, ReconcileRun
from broker.selectors.workloads import calibration_list, cluster_list, replay_estimate_list, workload_list
from broker.selectors.run_times import run_seconds_of
from broker.selectors.node_blocks import blocked_nodes
from broker.placement.wait_estimator import ErrorSummary, EstimatorReport
from broker.selectors.waits import wait_estimate_report
from portal.tenancy.access import AnyUser
from broker import runtime
from broker.spec import SHARED_PARTITIONINGS


def cluster_rows(*, user: AnyUser) -> list[dict]:
    now = runtime.now()
    blocked = blocked_nodes(now=now)
    rows = []
    for cluster in cluster_list(user=user):
        age = (now - cluster.last_inventory_at).total_seconds() if cluster.last_inventory_at else None
        pools = list(cluster.pools.all())
        rows.append(
            {
                "cluster": cluster,
                "pools": pools,
                "elastic": [(p.name, text) for p in pools if (text := elastic_summary(cluster, p)) is not None],
                "age_s": age,
                "stale": cluster.health == ClusterHealth.STALE,
                "limits": limit_rows(cluster.local_limits),
                "nodes_out": nodes_out(pools),
                "topology": topology_rows(pools),
                "blocked": sorted(blocked.get(cluster.id, {}).values(), key=lambda b: b.node),
            }
        )
    return rows


def nodes_out(pools: list[GpuPool]) -> list[dict]:
    """The nodes of the last report whose GPUs take no work, all or some of them, with the
    reason their control plane gives: none of them counts as idle (``NodeInventory.gpus_free``)."""
    rows = []
    for pool in pools:
        for node in pool.node_inventories():
            if node.provisioning:
                continue  # an elastic pool's node that is not up is not out of service
            out_of_service = not node.healthy or node.draining
            if not out_of_service and node.gpus_allocatable >= node.gpus_total:
                continue
            state = "unhealthy" if not node.healthy else "draining" if node.draining else "GPUs not allocatable"
            gpus = node.gpus_total if out_of_service else node.gpus_total - node.gpus_allocatable
            rows.append(
                {
                    "pool": pool.name,
                    "node": node.name,
                    "state": state,
                    "gpus": gpus,
                    "total": node.gpus_total,
                    "reason": node.health_reason,
                }
            )
    return rows


def topology_rows(pools: list[GpuPool]) -> list[dict]:
    """The cluster's topology levels as its control plane describes them, the widest first:
    per level, each domain with its nodes and its whole GPUs free of their total (a level
    whose domains are one node each, such as the host, is one row)."""
    order: dict[str, int] = {}
    domains: dict[str, dict[str, dict]] = defaultdict(dict)
    for pool in pools:
        for node in pool.node_inventories():
            if node.provisioning:
                continue
            for depth, (level, domain) in enumerate(node.topology):
                order[level] = min(order.get(level, depth), depth)
                row = domains[level].setdefault(domain, {"nodes": set(), "free": 0, "total": 0})
                row["nodes"].add(node.name)
                if node.partitioning == "whole":
                    row["free"] += node.gpus_free
                    row["total"] += node.gpus_total
    rows = []
    for level in sorted(order, key=lambda lv: (order[lv], lv)):
        found = domains[level]
        if all(len(d["nodes"]) == 1 for d in found.values()) and len(found) > 1:
            rows.append(
                {
                    "level": level,
                    "domain": f"each node its own ({len(found)})",
                    "nodes": len(found),
                    "free": sum(d["free"] for d in found.values()),
                    "total": sum(d["total"] for d in found.values()),
                }
            )
            continue
        rows += [
            {"level": level, "domain": name, "nodes": len(d["nodes"]), "free": d["free"], "total": d["total"]}
            for name, d in sorted(found.items())
        ]
    return rows


def elastic_summary(cluster: Cluster, pool: GpuPool) -> str | None:
    """An elastic pool's nodes as its last report gave them, and what it is registered with:
    "1 up, 2 provisioning, 1 more on demand (max 4; each in 8 min, released 10 min idle)"."""
    registered = registered_pools(cluster.config).get(pool.name)
    states = [str(n.get("provisioning", "")) for n in pool.nodes]
    if registered is None and not any(states):
        return None
    up, coming = states.count(""), states.count("requested")
    more = (registered.max_nodes - len(states) if registered else 0) + states.count("available")
    text = f"{up} up, {coming} provisioning, {max(0, more)} more on demand"
    if registered is not None:
        text += (
            f" (max {registered.max_nodes}; each in {registered.provisioning_s / 60:g} min, "
            f"billed until {registered.idle_release_s / 60:g} min idle)"
        )
    return text


def limit_rows(stored: dict | None) -> list[dict]:
    """The stored local limits as table rows: what sets it, where it applies, the limit,
    the use and the headroom (a per-job cap has no use)."""
    rows = []
    for cap in (stored or {}).get("caps", []):
        parts = [f"{cap[k]} {unit}" for k, unit in (("max_gpus", "GPUs"), ("max_nodes", "nodes")) if k in cap]
        if "max_time_s" in cap:
            parts.append(f"{cap['max_time_s'] / 60:g} min")
        rows.append(
            {
                "source": cap["source"],
                "applies": _applies(cap),
                "limit": "per job: " + ", ".join(parts),
                "used": None,
                "headroom": None,
            }
        )
    for quota in (stored or {}).get("quotas", []):
        limit, used = quota.get("limit_gpus"), quota.get("used_gpus", 0)
        text = "no GPU ceiling" if limit is None else f"{limit} GPUs"
        if quota.get("borrow_gpus") and limit is not None:
            text += f" (nominal {limit - quota['borrow_gpus']} + borrowing {quota['borrow_gpus']})"
        if quota.get("max_jobs") is not None:
            text += f", {quota['max_jobs']} jobs"
        rows.append(
            {
                "source": quota["source"],
                "applies": _applies(quota),
                "limit": text,
                "used": used,
                "headroom": None if limit is None else max(0, limit - used),
            }
        )
    shares = (stored or {}).get("shares", [])
    if shares:  # one row: a site may have hundreds of accounts
        low = min(shares, key=lambda f: f["points"])
        high = max(shares, key=lambda f: f["points"])
        rows.append(
            {
                "source": "fair share (Slurm's multifactor priority)",
                "applies": "every pool, by account",
                "limit": f"queue order: {len(shares)} accounts, factor {low['factor']:.2f} ({low['scope']}) "
                f"to {high['factor']:.2f} ({high['scope']}); a lower factor waits behind a higher",
                "used": None,
                "headroom": None,
            }
        )
    return rows


def _applies(limit: dict) -> str:
    where = f"pool {limit['pool']}" if limit.get("pool") else "every pool"
    return f"{where}, jobs of {limit['scope']}" if limit.get("scope") else f"{where}, every job"


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _unit(pool) -> str:
    """What one counted unit is: a whole GPU of a model, a MIG slice or a share of one.  Seven
    1g.10gb slices are not seven A100s, so each profile (and kind of share) gets a line of its own."""
    if pool.partitioning in ("", "whole"):
        return pool.gpu_model
    if pool.partitioning in SHARED_PARTITIONINGS:  # replicas or shards: parts of the same GPUs
        return f"{pool.gpu_model} {pool.partitioning} shares"
    return f"{pool.gpu_model} MIG {pool.partitioning} slices"


def overview(*, user: AnyUser) -> dict:
    now = runtime.now()
    rows = cluster_rows(user=user)
    capacity: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        for pool in row["pools"]:
            cell = capacity[(row["cluster"].name, _unit(pool))]
            for key in ("gpus_total", "gpus_allocatable", "gpus_allocated", "gpus_reserved", "gpus_idle"):
                cell[key] += getattr(pool, key)
    return {
        "rows": rows,
        "capacity": sorted((k, dict(v)) for k, v in capacity.items()),
        "figures": _figures(user, now),
        "now": now,
    }


def _figures(user: AnyUser, now) -> dict:
    day = now - timedelta(days=1)
    mine = workload_list(user=user)
    # started_at__gte leaves out the rows without a start
    started = cast(
        list[tuple[datetime, datetime, datetime | None]],
        list(mine.filter(started_at__gte=day).values_list("created_at", "started_at", "dispatched_at")),
    )
    waits = [(s - c).total_seconds() for c, s, _ in started]
    first_gpu = [(s - d).total_seconds() for _, s, d in started if d]
    depth = mine.filter(state__in=WAITING_STATES).count()
    failed = AuditRecord.objects.filter(
        workload__in=mine, created_at__gte=day, action__in=("dispatch.rejected", "workload.rejected")
    ).count()
    last_run = ReconcileRun.objects.first()
    cloud = mine.filter(cluster__location="cloud", started_at__isnull=False, started_at__gte=now.replace(day=1))
    spend = 0.0
    for w in cloud.select_related("cluster"):
        assert w.cluster is not None  # filtered on the cluster's location
        hours = (run_seconds_of(w) or 0.0) / 3600  # the cluster's run time, not the demo's wall span
        spend += hours * w.total_gpus * float(w.cluster.price_per_gpu_hour)
    # the learned queue-wait estimator against what followed, over the last week
    estimate = wait_estimate_report(mine, since=now - timedelta(days=7))
    return {
        "queue_wait_mean_s": mean(waits) if waits else None,
        "queue_wait_p95_s": _percentile(waits, 0.95),
        "time_to_first_gpu_p95_s": _percentile(first_gpu, 0.95),
        "queue_depth": depth,
        "failed_placements_24h": failed,
        "reconcile_lag_s": (now - last_run.finished_at).total_seconds() if last_run else None,
        "cloud_spend_month": round(spend, 2),
        "wait_estimate": estimate.overall if estimate else None,
        "wait_estimate_report": estimate,  # per destination too: the page's estimator section
    }


def estimator_overview(*, user: AnyUser, live: EstimatorReport | None) -> dict:
    """The wait estimator against what followed: ``live``, the user's tenants' workloads of
    the last week (the overview's ``wait_estimate_report``: read once for both), and the
    newest trace replays' runs; overall and per destination, in minutes."""
    return {
        "live": _in_minutes(live) if live else None,
        "replays": [{"run": row, **_in_minutes(row.report())} for row in replay_estimate_list(user=user)],
        # what the replays' simulator is worth: its newest calibrations against real schedulers
        "calibrations": list(calibration_list(user=user)),
    }


def _in_minutes(report: EstimatorReport) -> dict:
    return {
        "overall": _minutes(report.overall),
        "destinations": [
            {"cluster": d.cluster or "-", "pool": d.pool or "-", **_minutes(d.summary)} for d in report.by_destination
        ],
    }


def _minutes(summary: ErrorSummary) -> dict:
    return {"count": summary.count, **{k.removesuffix("_s"): v / 60 for k, v in summary.seconds().items()}}
