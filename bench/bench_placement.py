"""Placement benchmark: 10,000 pending workloads against 100 clusters x 100 nodes.

    .venv/bin/python bench/bench_placement.py [--workloads N] [--clusters N] [--nodes N]

Reports fleet build time, decisions/s on one core (full ranking with every candidate,
top-3 only, and a scheduling pass that books each winner; each starts from a fresh
PreparedFleet, so filling the per-shape cache is counted), and peak memory under
tracemalloc (measured in a separate pass, since tracing slows Python down).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.backends.base import InventorySnapshot, NodeInventory, PoolInventory, QueueStats  # noqa: E402
from broker.placement import ClusterFacts, PreparedFleet, load_policy_file  # noqa: E402
from broker.placement.engine import place_prepared  # noqa: E402
from broker.spec import WorkloadSpec  # noqa: E402

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)
MODELS = [("NVIDIA A100-SXM4-80GB", 80, "a100-80gb"), ("NVIDIA A100-SXM4-40GB", 40, "a100-40gb"),
          ("NVIDIA H100 80GB HBM3", 80, "h100"), ("NVIDIA L4", 24, "l4"), ("Tesla T4", 16, "t4")]
REGIONS = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "onprem-eu"]
DATA = ["", "s3://eu-bucket", "s3://us-bucket", "nfs://onprem-eu"]
TENANTS = ["physics", "clinical", "bio", "chem", "ml"]


def make_fleet(rng: random.Random, clusters: int, nodes: int):
    snaps, facts = [], []
    for c in range(clusters):
        name = f"c{c:03d}"
        onprem = c % 3 == 0
        region = "onprem-eu" if onprem else rng.choice(REGIONS[:4])
        split = nodes if c % 4 else nodes * 3 // 4  # every 4th cluster also has a MIG pool
        model, mem, _ = MODELS[c % len(MODELS)]
        pools = [_pool(rng, name, "gpu", model, mem, "whole", range(split), 8)]
        if split < nodes:
            pools.append(_pool(rng, name, "mig", "NVIDIA A100-SXM4-80GB", 80, "1g.10gb",
                               range(split, nodes), 56))
        age = rng.choice([5, 30, 60, 120, 200, 400])  # a few clusters are stale (>300 s)
        queue = QueueStats(pending_jobs=rng.randint(0, 20), pending_gpus=rng.randint(0, 64),
                           gpu_hours_per_hour=rng.uniform(10, 400))
        snaps.append(InventorySnapshot(name, NOW - timedelta(seconds=age), tuple(pools), queue))
        facts.append(ClusterFacts(
            name=name, kind="slurm" if onprem else "kueue", region=region,
            location="onprem" if onprem else "cloud",
            price_per_gpu_hour=rng.uniform(0.5, 1.5) if onprem else rng.uniform(1.0, 4.0),
            egress_per_gb=0.0 if onprem else rng.choice([0.02, 0.05, 0.09]),
            bandwidth_gbps={d: rng.choice([1.0, 10.0, 25.0]) for d in DATA if d},
            image_pull_s=rng.uniform(10, 120), provisioning_s=0 if onprem else rng.uniform(0, 300),
            draining=rng.random() < 0.03,
            data_locations=("nfs://onprem-eu",) if onprem else
            (("s3://eu-bucket",) if region.startswith("eu") else ("s3://us-bucket",))))
    return snaps, facts


def _pool(rng, cluster, pool, model, mem, part, node_range, per_node):
    nodes = []
    for n in node_range:
        used = rng.choice([0, 0, 1, 2, 4, 6, 8]) * per_node // 8
        nodes.append(NodeInventory(
            name=f"{cluster}-n{n:03d}", gpu_model=model, gpu_memory_gb=mem, gpus_total=per_node,
            gpus_allocatable=per_node, gpus_allocated=used, partitioning=part,
            healthy=rng.random() > 0.01, interconnect_domain=f"ib{n // 16}",
            owner="slurm"))
    return PoolInventory(pool, model, mem, part, "slurm", tuple(nodes))


def make_workloads(rng: random.Random, count: int) -> list[tuple[WorkloadSpec, str]]:
    out = []
    for i in range(count):
        mig = rng.random() < 0.1
        gpw = rng.choice([1, 2, 4, 8]) if not mig else rng.choice([1, 2])
        spec = WorkloadSpec(
            project="p", name=f"w{i}", command="train", gpus_per_worker=gpw,
            workers=rng.choice([1, 1, 1, 2, 4, 8]), gpu_class="a100-80gb" if mig else
            rng.choice([m[2] for m in MODELS]), mig_profile="1g.10gb" if mig else "",
            time_limit_minutes=rng.choice([30, 60, 240, 1440]),
            data_location=rng.choice(DATA), data_size_gb=rng.choice([0, 10, 500, 5000]),
            residency=("eu",) if rng.random() < 0.2 else (),
            same_interconnect=rng.random() < 0.3)
        out.append((spec, rng.choice(TENANTS)))
    return out


def run(fleet: PreparedFleet, workloads, limit, book: bool) -> tuple[float, int]:
    placed = 0
    start = time.perf_counter()
    for spec, tenant in workloads:
        result = place_prepared(fleet, spec, tenant=tenant, quota_remaining=10_000, now=NOW, limit=limit)
        if result.ranked:
            placed += 1
            if book:
                fleet.take(result.ranked[0])
    return time.perf_counter() - start, placed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    rng = random.Random(7)
    policy = load_policy_file(str(Path(__file__).resolve().parents[1]
                                  / "broker/policy/default.yaml"))
    snaps, facts = make_fleet(rng, args.clusters, args.nodes)
    workloads = make_workloads(rng, args.workloads)
    n = len(workloads)
    print(f"fleet: {args.clusters} clusters x {args.nodes} nodes, {n} workloads")

    t0 = time.perf_counter()
    fleet = PreparedFleet(snaps, facts, policy)
    print(f"build PreparedFleet: {(time.perf_counter() - t0) * 1000:.1f} ms")
    for label, limit, book in (("rank all candidates", None, False),
                               ("top-3 candidates", 3, False),
                               ("pass, booking each winner", 3, True)):
        fleet = PreparedFleet(snaps, facts, policy)  # cold shape cache: its fill is counted
        seconds, placed = run(fleet, workloads, limit, book)
        print(f"{label:28s}: {n / seconds:9,.0f} decisions/s "
              f"({seconds * 1e6 / n:6.1f} us each, {placed} placed)")

    fleet = PreparedFleet(snaps, facts, policy)
    ranked = [len(place_prepared(fleet, s, tenant=t, quota_remaining=10_000, now=NOW).ranked)
              for s, t in workloads]
    print(f"candidates ranked per decision: mean {sum(ranked) / len(ranked):.1f}, "
          f"max {max(ranked)}; request shapes cached: {len(fleet._static)}")
    del fleet, snaps, facts

    tracemalloc.start()
    snaps, facts = make_fleet(random.Random(7), args.clusters, args.nodes)
    inventory = tracemalloc.get_traced_memory()[0]
    fleet = PreparedFleet(snaps, facts, policy)
    run(fleet, workloads, None, False)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"tracemalloc: inventory {inventory / 2**20:.1f} MiB; with PreparedFleet and {n} "
          f"decisions: peak {peak / 2**20:.1f} MiB, retained {current / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
