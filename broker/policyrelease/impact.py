"""The impact of a proposed policy: the same jobs, the same fleet, the active and the
proposed policy, through the trace replay's own loop, simulator and broker services.

Scored per tenant from the replay's ground truth (the tracker's starts, the simulator's
usage), as ``broker.replay.metrics`` scores a whole run.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Sequence

from broker.fleet_file import FleetDescription
from broker.placement.policy_loader import load_policy
from broker.replay.broker_strategy import BrokerPreset
from broker.replay.jobs import ReplayJob
from broker.replay.loop import ReplayRun
from broker.replay.metrics import percentile, startup_s
from broker.replay.runner import replay_run

COLUMNS = ("p95_wait_s", "p95_ttfg_s", "failed_placements", "gpu_hours", "cloud_spend")


def per_tenant(run: ReplayRun, fleet: FleetDescription) -> dict[str, dict]:
    waits: dict[str, list[float]] = defaultdict(list)
    ttfg: dict[str, list[float]] = defaultdict(list)
    failed: dict[str, int] = defaultdict(int)
    hours: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    prices = {c.name: c.price_per_gpu_hour for c in fleet.clusters if c.location == "cloud"}
    tenants = set()
    for o in run.outcomes.values():
        tenant = o.job.tenant
        tenants.add(tenant)
        if o.fragmented or o.rejected > 0 or o.start_s is None:
            failed[tenant] += 1  # refused at a destination, split by fragmentation, or never placed
        if o.wait_s is None:
            continue
        assert o.start_s is not None  # a wait is known only once it started
        waits[tenant].append(o.wait_s)
        ttfg[tenant].append(o.wait_s + startup_s(fleet, o.cluster))
        ran = min(o.job.duration_s, max(0.0, run.end_s - o.start_s))
        hours[tenant][o.cluster] += o.job.total_gpus * ran / 3600.0
    return {
        t: {
            "jobs": sum(1 for o in run.outcomes.values() if o.job.tenant == t),
            "p95_wait_s": percentile(waits[t], 95),
            "p95_ttfg_s": percentile(ttfg[t], 95),
            "failed_placements": failed[t],
            "gpu_hours": {c: round(h, 2) for c, h in sorted(hours[t].items())},
            "cloud_spend": round(sum(h * prices.get(c, 0.0) for c, h in hours[t].items()), 2),
        }
        for t in sorted(tenants)
    }


def _empty() -> dict:
    return {
        "jobs": 0,
        "p95_wait_s": 0.0,
        "p95_ttfg_s": 0.0,
        "failed_placements": 0,
        "gpu_hours": {},
        "cloud_spend": 0.0,
    }


def compare(
    jobs: Sequence[ReplayJob],
    fleet: FleetDescription,
    policies: dict[str, str],
    progress: Callable[[int, str], None] = lambda pct, msg: None,
    seed: int = 7,
) -> dict:
    """{label: per-tenant figures} for each policy text, in the order given."""
    out: dict[str, dict] = {}
    for i, (label, text) in enumerate(policies.items()):
        progress(int(100 * i / len(policies)), f"replaying {len(jobs)} workloads under the {label} policy")
        classes = load_policy(text).gpu_classes
        # a class the policy no longer defines cannot be submitted: those jobs fail to place
        kept = [j for j in jobs if j.gpu_class in classes]
        strategy = BrokerPreset(label, fleet, policy_text=text, tenant_prefix="")
        # the instant loop: a comparison of two policies on the same history, quick enough for
        # a reviewer to wait for; the production loop (docs/replay.md) is for the replays
        out[label] = per_tenant(replay_run(label, kept, fleet, seed, strategy, loop="instant"), fleet)
        for job in jobs:
            if job.gpu_class not in classes:
                row = out[label].setdefault(job.tenant, _empty())
                row["jobs"] += 1
                row["failed_placements"] += 1
    progress(100, "done")
    return out
