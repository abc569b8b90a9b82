"""Where the same MultiKueue workloads land, and what they cost: Kueue's built-in AllAtOnce
dispatcher against the broker as MultiKueue's external dispatcher.

    .ci/setup.d/k8s-mkd.sh   (or: K8S_CI_RUN=/run/k8s-mkd K8S_CI_PORT_BASE=16600 K8S_CI_WORKER2=1 \
                              K8S_CI_NO_VOLCANO=1 K8S_CI_MK_DISPATCHER=gpubroker.io/dispatcher \
                              scripts/k8s-cluster up)
    .venv/bin/python bench/bench_multikueue_dispatch.py [--env /run/k8s-mkd/env]

One manager, two workers with 8 A100s each: worker-main at 3.00 per GPU-hour, holding the
dataset "lattice-ds" (egress 0.50 per GB), worker-worker2 at 1.00.  The same six Jobs
(three of them reading 2 TB of lattice-ds) are created on the manager with the Kubernetes
client, first with the manager's Kueue on AllAtOnce (`scripts/k8s-cluster dispatcher
default`: every worker gets a copy, the first to admit wins), then on the broker's
dispatcher (`... dispatcher gpubroker.io/dispatcher`; the broker's pass runs every second
with the cost preset).  Printed per Job: where it was admitted and its cost for one hour of
run (GPUs x hours x the worker's price, plus the dataset's egress when it runs away from its
data); then the totals.  Every Job is deleted after each round, and the manager is left on
the dispatcher it had.  The broker side uses a throwaway SQLite database.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DB = Path(tempfile.mkdtemp(prefix="bench-mk-")) / "bench.sqlite3"
os.environ.update(DATABASE_URL=f"sqlite:///{DB}", DJANGO_SETTINGS_MODULE="config.settings",
                  CELERY_BROKER_URL="", GPUBROKER_ENABLE_KUEUE="true", GPUBROKER_ENABLE_SIMULATOR="false")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from tests.broker.backends.kube.mk_dispatcher import support as s  # noqa: E402
from tests.broker.backends.kube.mk_dispatcher.conftest import DISPATCHER, POLICY_MODELS, policy_text  # noqa: E402
from tests.broker.backends.kube.real import cluster as c  # noqa: E402

PRICE = {"worker-main": 3.0, "worker-worker2": 1.0}
EGRESS_PER_GB, DATA_GB, HOURS = 0.5, 2000, 1.0
DATA = {"gpubroker.io/data-location": "lattice-ds", "gpubroker.io/data-size-gb": str(DATA_GB)}
# name: (pods, GPUs per pod, reads the dataset)
JOBS = {"train-a": (2, 2, False), "eval-a": (1, 1, False), "sweep-1": (1, 2, False),
        "qcd-1": (1, 4, True), "qcd-2": (1, 2, True), "qcd-3": (2, 1, True)}


def cost(job: str, worker: str) -> float:
    pods, gpus, data = JOBS[job]
    egress = DATA_GB * EGRESS_PER_GB if data and worker != "worker-main" else 0.0
    return pods * gpus * HOURS * PRICE.get(worker, 0.0) + egress


def switch(env: dict[str, str], name: str) -> None:
    run_dir = str(Path(env["K8S_MANAGER_KUBECONFIG"]).parents[1])
    base = int(env["K8S_MANAGER_API"].rsplit(":", 1)[1]) - 53  # the manager's apiserver: base+50+3
    subprocess.run([str(ROOT / "scripts" / "k8s-cluster"), "dispatcher", name], check=True, timeout=300,
                   env={**os.environ, "K8S_CI_RUN": run_dir, "K8S_CI_PORT_BASE": str(base),
                        "K8S_CI_WORKER2": "1", "K8S_CI_NO_VOLCANO": "1"})


def create_all(manager) -> None:
    for name, (pods, gpus, data) in JOBS.items():
        s.create_job(manager, s.job(name, pods=pods, gpus=gpus, seconds=120, annotations=DATA if data else None))


def landed(manager) -> dict[str, str]:
    out = {}
    for wl in s.workloads(manager):
        name = (wl["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
        out[name] = (wl.get("status") or {}).get("clusterName", "")
    return out


def wait_admitted(manager, step=None, timeout_s: float = 240) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        if step is not None:
            step()
        where = landed(manager)
        if len(where) == len(JOBS) and all(where.values()):
            return where
        if time.monotonic() > deadline:
            raise SystemExit(f"not all admitted in {timeout_s:.0f}s: {where}")
        time.sleep(1)


def broker_fleet(env: dict[str, str]):
    from broker.models import Cluster, Quota
    from broker.services.fleet.registration import gpu_classes_from_policy
    from portal.tenancy.models import Project, Tenant

    tenant = Tenant.objects.create(slug="physics", name="Physics")
    Project.objects.create(tenant=tenant, slug="lattice", name="Lattice", k8s_namespace=s.NS)
    classes = {g.slug: g for g in gpu_classes_from_policy()}
    Quota.objects.create(tenant=tenant, gpu_class=classes["a100-80gb"], limit_gpus=64)
    common = {"namespace": s.NS, "queue": "default", "model_names": POLICY_MODELS}
    Cluster.objects.create(name="mk-a", kind="kueue", region="eu-west", location="onprem", price_per_gpu_hour=3,
                           egress_per_gb=EGRESS_PER_GB, config={**common, "kubeconfig": env["K8S_MAIN_KUBECONFIG"],
                                                                "data_locations": ["lattice-ds"]})
    Cluster.objects.create(name="mk-b", kind="kueue", region="eu-west", location="onprem", price_per_gpu_hour=1,
                           config={**common, "kubeconfig": env["K8S_WORKER2_KUBECONFIG"]})
    return Cluster.objects.create(
        name="mk-manager", kind="multikueue", region="eu-west", location="onprem",
        config={"kubeconfig": env["K8S_MANAGER_KUBECONFIG"], "dispatcher": {
            "name": DISPATCHER, "workers": {"worker-main": "mk-a", "worker-worker2": "mk-b"},
            "queues": {f"{s.NS}/default": {"project": "lattice", "gpu_class": "a100-80gb"}},
            "model_names": POLICY_MODELS}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default=os.environ.get("K8S_MKD_ENV", "/run/k8s-mkd/env"))
    args = parser.parse_args()
    from broker.services.dispatching.multikueue import multikueue_dispatch
    from broker.services.fleet.policy import policy_override
    from tests.broker.backends.slurm.support import load_env_file

    env = load_env_file(args.env)
    apis = {"manager": c.api_client(env["K8S_MANAGER_KUBECONFIG"]),
            "worker-main": c.api_client(env["K8S_MAIN_KUBECONFIG"]),
            "worker-worker2": c.api_client(env["K8S_WORKER2_KUBECONFIG"])}
    for worker in s.WORKERS:
        c.apply(apis[worker], *s.worker_nodes(worker.removeprefix("worker-")), *s.worker_objects())
    c.apply(apis["manager"], *s.manager_objects({"worker-main": env["K8S_MULTIKUEUE_SECRET"],
                                                 "worker-worker2": env["K8S_MULTIKUEUE_SECRET_WORKER2"]}))
    call_command("migrate", verbosity=0)
    manager = broker_fleet(env)
    before = env.get("K8S_MK_DISPATCHER", "") or "default"
    results: dict[str, dict[str, str]] = {}
    try:
        for api in apis.values():
            s.delete_all(api)
        switch(env, "default")
        create_all(apis["manager"])
        results["AllAtOnce"] = wait_admitted(apis["manager"])
        for api in apis.values():
            s.delete_all(api)
        switch(env, DISPATCHER)
        with policy_override(policy_text(), "bench"):
            create_all(apis["manager"])
            results["broker"] = wait_admitted(apis["manager"], lambda: multikueue_dispatch(cluster_id=manager.id))
            for api in apis.values():
                s.delete_all(api)
            multikueue_dispatch(cluster_id=manager.id)  # deleted there: ended and released here
    finally:
        switch(env, before)
    report(results)


def report(results: dict[str, dict[str, str]]) -> None:
    print(f"{'job':10} {'GPUs':>4} {'data':>5} | {'AllAtOnce':>15} {'cost':>8} | {'broker':>15} {'cost':>8}")
    totals = dict.fromkeys(results, 0.0)
    for job, (pods, gpus, data) in JOBS.items():
        cells = []
        for mode, where in results.items():
            spent = cost(job, where[job])
            totals[mode] += spent
            cells.append(f"{where[job]:>15} {spent:8.2f}")
        print(f"{job:10} {pods * gpus:4d} {'2 TB' if data else '-':>5} | " + " | ".join(cells))
    print(f"{'total':22} | {'':15} {totals['AllAtOnce']:8.2f} | {'':15} {totals['broker']:8.2f}")
    print(f"cost per hour of run: broker / AllAtOnce = {totals['broker'] / totals['AllAtOnce']:.2f}")


if __name__ == "__main__":
    main()
