"""The simulator against real Kueue and real Volcano (issue 25).

Kueue: the shipped contended slice played in the
calibration profile's LocalQueues (a cohort of two ClusterQueues, borrowing, preemption
within one of them; tests/broker/calibration/data/kueue-calib-profile.yaml) and on the
simulator built from the quotas the Kueue backend reads there.

Kueue admits on events, with no period: the cycle is the player's one-second sampling and
the API's whole-second timestamps (2 s, starts within it tied).  The slice is the steady one
(kueue-steady-16gpu.json: no arrival, end or eviction within the control plane's lag of
another that decides an order; the first slice's order moved between real runs, 0.91-0.95 of
pairs): held to the issue's targets, 95% of pairs in the same order and a median error
within three cycles, 6 s (docs/simulator.md, "Kueue").

Volcano: its steady slice (volcano-steady-16gpu.json, drawn as Kueue's was) played in the
Volcano profile's Queues (one with a capability) on a pool of its own
(tests/broker/calibration/data/volcano-calib-profile.yaml), against the simulator built
from what the Volcano backend reads there; held to the issue's targets, 95% of pairs and a
median error within three 2-s cycles (docs/simulator.md, "Volcano")."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import yaml
from kubernetes import client

from broker.backends.kube import KubeConfig, KueueBackend
from broker.backends.kube.volcano import VolcanoBackend
from broker.calibration.jobs import load
from broker.calibration.played import Played
from broker.calibration.run import Calibration, calibrate_kube
from broker.management.commands.calibrate import summary

from . import cluster as c
from .conftest import settings

pytestmark = pytest.mark.k8s

DATA = Path(__file__).parents[3] / "calibration" / "data"
PROFILE = DATA / "kueue-calib-profile.yaml"
PAIRS_TARGET = 0.95
MEDIAN_ERROR_TOLERANCE_S = 6.0  # three 2-s cycles
SLICE = DATA / "kueue-steady-16gpu.json"


@pytest.fixture
def calib_profile(kueue_cluster: client.ApiClient) -> Iterator[None]:
    """The profile's queues for this test only: the other tests keep theirs as they are."""
    docs = [d for d in yaml.safe_load_all(PROFILE.read_text()) if d]
    c.apply(kueue_cluster, *docs)
    custom = client.CustomObjectsApi(kueue_cluster)

    def active() -> bool:
        for name in ("calib-cq", "calib-lend"):
            cq = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", name)
            conds = (cq.get("status") or {}).get("conditions") or []
            if not any(x["type"] == "Active" and x["status"] == "True" for x in conds):
                return False
        return True

    c.wait_for(active, 60, what="calibration ClusterQueues active")
    yield
    c.delete_jobs(kueue_cluster)
    for d in reversed(docs):
        meta = d["metadata"]
        if d["kind"] == "LocalQueue":
            custom.delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", meta["namespace"], "localqueues",
                                                   meta["name"])
        else:
            custom.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", meta["name"])


def borrowed_gpus(real: Played, gpus: dict[str, int], broker_jobs: set[str], nominal: int) -> int:
    """The most GPUs the broker's ClusterQueue ran past its nominal quota (so borrowed) at
    any instant a job started."""
    most = 0
    for name, seen in real.jobs.items():
        at = seen.started_s
        if at is None:
            continue
        running = sum(gpus[n] for n, o in real.jobs.items() if n in broker_jobs and o.started_s is not None
                      and o.started_s <= at and (o.ended_s is None or o.ended_s > at))
        most = max(most, running - nominal)
    return most


VOLCANO_PROFILE = DATA / "volcano-calib-profile.yaml"
VOLCANO_SLICE = DATA / "volcano-steady-16gpu.json"
VOLCANO_POOL = "NVIDIA-L4"
VOLCANO_CAPABILITY = 8  # calib-v's GPUs in the profile
# the cycle: vc-scheduler's 1-s session, sampled each second, whole-second timestamps: 2 s.
# The first slice (volcano-contended-16gpu.json) met the targets on a quiet machine and not
# under CI's load (0.92-1.00 of pairs, 2.0-8.2 s: its order hangs on a second of lag), so CI
# held floors of 90% and 12 s for it


@pytest.fixture
def volcano_calib_profile(kueue_cluster: client.ApiClient, k8s_env) -> Iterator[None]:
    """The profile's pool and Volcano Queues for this test only (nodes and queues removed
    after it, so the other tests' inventories and queues stay as they are)."""
    assert k8s_env.get("K8S_VOLCANO") == "1", "Volcano is not running in the main cluster"
    docs = [d for d in yaml.safe_load_all(VOLCANO_PROFILE.read_text()) if d]
    c.apply(kueue_cluster, *docs)
    custom, core = client.CustomObjectsApi(kueue_cluster), client.CoreV1Api(kueue_cluster)

    def open_queues() -> bool:
        for d in docs:
            if d["kind"] == "Queue":
                q = custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", d["metadata"]["name"])
                if (q.get("status") or {}).get("state") != "Open":
                    return False
        return True

    c.wait_for(open_queues, 60, what="calibration Volcano queues open")
    yield
    c.delete_jobs(kueue_cluster)
    for d in docs:
        name = d["metadata"]["name"]
        if d["kind"] == "Node":
            core.delete_node(name)
        else:
            custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)


def _kueue(kubeconfig: str) -> Calibration:
    backend = KueueBackend("k8s-main", KubeConfig(kubeconfig=kubeconfig), settings())
    try:
        return calibrate_kube(load(SLICE), cluster="k8s-main", backend=backend, inventory=backend.inventory,
                              namespace=c.NAMESPACE, queue="calib", local_queue="calib-local")
    finally:
        backend.close()


def _volcano(kubeconfig: str) -> Calibration:
    backend = VolcanoBackend("k8s-main", KubeConfig(kubeconfig=kubeconfig), settings())
    try:
        return calibrate_kube(load(VOLCANO_SLICE), cluster="k8s-main", backend=backend,
                                 inventory=backend.inventory, namespace=c.NAMESPACE, queue="calib-v",
                                 local_queue="calib-v-local", pool=VOLCANO_POOL)
    finally:
        backend.close()


@pytest.mark.volcano
def test_the_simulator_starts_the_contended_slices_as_kueue_and_volcano_do(
        k8s_env, calib_profile, volcano_calib_profile, capsys):
    # one after the other: played at the same time, each control plane's lag grew with the
    # other's load on the one API server, and the lag compounds along a queue (the project's
    # CI, 2026-12-06: Volcano's median error 13.2 s, its later jobs 12-18 s late, the first
    # ones 0.2 s). The slices play for 75 s and 15 s, so the k8s lane grows by about a
    # minute and a half, and it is not the run's long pole
    volcano_result = _volcano(k8s_env["K8S_MAIN_KUBECONFIG"])
    kueue_result = _kueue(k8s_env["K8S_MAIN_KUBECONFIG"])
    with capsys.disabled():
        print("\n" + summary(kueue_result) + summary(volcano_result))
    _kueue_agrees(kueue_result)
    _volcano_agrees(volcano_result)


def _kueue_agrees(result: Calibration) -> None:
    jobs = load(SLICE)
    rep = result.repetitions[0]
    got = rep.agreement
    # the slice is contended as played on Kueue, not only on paper: jobs wait, the broker's
    # queue borrows from the cohort (past its nominal 4 + 4), a higher-priority job preempts
    assert got.waited >= 0.3 * got.jobs, got
    gpus = {j.name: j.gpus for j in jobs.jobs}
    assert borrowed_gpus(rep.real, gpus, {j.name for j in jobs.jobs if not j.local}, nominal=8) > 0
    assert got.preempted_real >= 1, got
    # the simulator agrees, to the targets
    assert got.pair_order >= PAIRS_TARGET, (got.pair_order, got.errors_s)
    assert got.median_abs_error_s <= MEDIAN_ERROR_TOLERANCE_S, (got.median_abs_error_s, got.errors_s)


def _volcano_agrees(result: Calibration) -> None:
    jobs = load(VOLCANO_SLICE)
    rep = result.repetitions[0]
    got = rep.agreement
    # contended as played on Volcano: jobs wait, gangs wait for room, the gang past its
    # queue's capability waits by rule until it is cancelled. Whether a gang is ever sampled
    # partly placeable ("gang") or only with no room ("capacity") depends on the order Volcano
    # takes (the project's CI, 2026-12-05: one run saw only "capacity"); the mapping of each
    # message is tested on captured PodGroups (tests/broker/backends/kube/test_captured.py)
    assert got.waited >= 0.3 * got.jobs, got
    gangs = {j.name for j in jobs.jobs if j.workers > 1}
    real_reasons = [(n, r) for at in rep.real.reasons.values() for n, r in at.items()]
    assert any(n in gangs and r in ("gang", "capacity") for n, r in real_reasons), rep.real.notes
    over = [j.name for j in jobs.jobs if not j.local and j.gpus > VOLCANO_CAPABILITY]
    assert over and all((n, "policy") in real_reasons and rep.real.jobs[n].started_s is None for n in over), (
        rep.real.notes)
    assert got.pair_order >= PAIRS_TARGET, (got.pair_order, got.errors_s)
    assert got.median_abs_error_s <= MEDIAN_ERROR_TOLERANCE_S, (got.median_abs_error_s, got.errors_s)
