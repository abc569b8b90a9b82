"""Dispatch throughput: KueueBackend.submit against a plain loop of creates with the
official client, on the real Kueue cluster; and admission latency as Kueue reports it.

    scripts/k8s-cluster up
    .venv/bin/python bench/bench_kueue_dispatch.py [--n 500] [--batch 10]

Both loops create N suspended one-GPU Jobs in namespace "bench" behind LocalQueue "bench"
(a ClusterQueue with room for all of them, on kwok nodes of their own, pods run 1 s).  The
plain loop sends the same manifest the backend builds, through BatchV1Api.create_namespaced_job
with the client's defaults.  They alternate in batches, so a growing queue slows both
alike.  Reports jobs/s of each, the ratio (backend / plain; target >= 0.8), per-create
latency, and created -> Admitted latency p50/p95 from the Workloads' own timestamps (the
API server keeps seconds).  Every bench Job is deleted at the end.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client, config, dynamic  # noqa: E402

from broker.backends.base import ProjectIdentity  # noqa: E402
from broker.backends.kube import BackendSettings, KubeConfig, KueueBackend  # noqa: E402
from broker.spec import WorkloadSpec  # noqa: E402

ENV_FILE = os.environ.get("K8S_CI_ENV", "/run/k8s-ci/env")
NS = "bench"
PRODUCT = "BENCH-GPU"
KV = "kueue.x-k8s.io/v1beta2"


def load_env(path: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in open(path, encoding="utf-8"):
        key, sep, value = line.strip().partition("=")
        if sep:
            env[key] = value
    return env


def bench_objects(n: int) -> list[dict]:
    gpus = 2 * n + 10
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"bench-{i}", "annotations": {"kwok.x-k8s.io/node": "fake"},
                           "labels": {"type": "kwok", "nvidia.com/gpu.product": PRODUCT}},
              "status": {"allocatable": res, "capacity": res}}
             for i, res in enumerate([{"cpu": "1000", "memory": "4Ti", "pods": "500",
                                       "nvidia.com/gpu": "500"}] * 4)]
    return nodes + [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": KV, "kind": "ResourceFlavor", "metadata": {"name": "bench"},
         "spec": {"nodeLabels": {"nvidia.com/gpu.product": PRODUCT}}},
        {"apiVersion": KV, "kind": "ResourceFlavor", "metadata": {"name": "bench-cpu"}, "spec": {}},
        {"apiVersion": KV, "kind": "ClusterQueue", "metadata": {"name": "bench-cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [
             {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "bench-cpu", "resources": [
                 {"name": "cpu", "nominalQuota": gpus}, {"name": "memory", "nominalQuota": f"{gpus}Gi"}]}]},
             {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "bench", "resources": [
                 {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}},
        {"apiVersion": KV, "kind": "LocalQueue", "metadata": {"name": "bench", "namespace": NS},
         "spec": {"clusterQueue": "bench-cq"}}]


def apply(api: client.ApiClient, docs: list[dict]) -> None:
    dyn = dynamic.DynamicClient(api)
    for doc in docs:
        res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        meta = doc["metadata"]
        res.server_side_apply(body=doc, name=meta["name"], namespace=meta.get("namespace"),
                              field_manager="gpubroker-bench", force_conflicts=True)


def spec(i: int) -> WorkloadSpec:
    return WorkloadSpec(project="bench", name=f"b{i}", command="sleep 1", gpus_per_worker=1,
                        gpu_models=("BENCH",), cpus_per_worker=1, memory_gb_per_worker=1,
                        time_limit_minutes=5)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def admission_latencies(api: client.ApiClient, expected: int, wait_s: float) -> list[float]:
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + wait_s
    while True:
        wls = custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", NS, "workloads")["items"]
        out = []
        for wl in wls:
            adm = next((c for c in (wl.get("status") or {}).get("conditions") or []
                        if c["type"] == "Admitted" and c["status"] == "True"), None)
            if adm:
                created = datetime.fromisoformat(wl["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
                admitted = datetime.fromisoformat(adm["lastTransitionTime"].replace("Z", "+00:00"))
                out.append((admitted - created).total_seconds())
        if len(out) >= expected or time.monotonic() > deadline:
            return out
        time.sleep(2)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--wait", type=float, default=600, help="seconds to wait for admissions")
    args = parser.parse_args()
    env = load_env(ENV_FILE)
    kubeconfig = env["K8S_MAIN_KUBECONFIG"]
    api = config.new_client_from_config(config_file=kubeconfig)
    apply(api, bench_objects(args.n))
    backend = KueueBackend("bench", KubeConfig(kubeconfig=kubeconfig), BackendSettings(
        default_namespace=NS, default_queue="bench", model_names={PRODUCT: "BENCH"}))
    batch_api = client.BatchV1Api(api)
    identity = ProjectIdentity(tenant="bench", project="bench", k8s_namespace=NS, queue="bench")
    run = uuid.uuid4().hex[:6]
    ours: list[float] = []
    plain: list[float] = []
    for start in range(0, args.n, args.batch):
        for i in range(start, min(args.n, start + args.batch)):
            ours.append(timed(lambda: backend.submit(spec(i), f"wl-{run}-o{i}", identity)))
        for i in range(start, min(args.n, start + args.batch)):
            body = backend.build_manifest(spec(i), f"wl-{run}-p{i}", identity)
            plain.append(timed(lambda: batch_api.create_namespaced_job(NS, body)))
    rate_ours, rate_plain = len(ours) / sum(ours), len(plain) / sum(plain)
    print(f"kueue dispatch, {args.n} jobs each, batches of {args.batch}")
    print(f"  backend.submit : {rate_ours:7.1f} jobs/s  p50 {statistics.median(ours) * 1000:6.1f} ms"
          f"  p95 {pct(ours, 0.95) * 1000:6.1f} ms")
    print(f"  plain create   : {rate_plain:7.1f} jobs/s  p50 {statistics.median(plain) * 1000:6.1f} ms"
          f"  p95 {pct(plain, 0.95) * 1000:6.1f} ms")
    print(f"  ratio backend/plain: {rate_ours / rate_plain:.2f} (target >= 0.8)")
    lat = admission_latencies(api, 2 * args.n, args.wait)
    print(f"  admitted {len(lat)}/{2 * args.n}: created -> Admitted p50 {pct(lat, 0.5):.0f} s"
          f"  p95 {pct(lat, 0.95):.0f} s  max {max(lat, default=float('nan')):.0f} s")
    batch_api.delete_collection_namespaced_job(NS, propagation_policy="Background")
    backend.close()
    api.close()


if __name__ == "__main__":
    main()
