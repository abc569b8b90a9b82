"""The replay on an elastic cloud: a job sent there waits for its node's provisioning, and
the cloud spend includes the nodes' idle tail, as the bill does."""
from __future__ import annotations

import pytest

from broker.fleet_file import parse_fleet
from broker.replay.jobs import ReplayJob
from broker.replay.metrics import compute
from broker.replay.runner import replay_run

ELASTIC_FLEET = """
clusters:
  - name: onprem
    kind: simulator
    flavor: slurm
    region: eu-west
    location: onprem
    price_per_gpu_hour: 1.0
    nodes:
      - {count: 1, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 8, name_prefix: onprem-}
  - name: cloud
    kind: simulator
    flavor: kueue
    region: eu-central
    location: cloud
    price_per_gpu_hour: 4.0
    image_pull_s: 0
    nodes:
      - {count: 0, max_nodes: 2, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 8, name_prefix: cloud-,
         provisioning_s: 480, idle_release_s: 600}
"""


def _job(key: str, at: float, gpus: int, run_s: float) -> ReplayJob:
    return ReplayJob(key=key, submit_s=at, tenant="t0", gpu_class="a100-80gb", min_memory_gb=80,
                     gpus_per_worker=gpus, workers=1, duration_s=run_s)


def test_a_job_bursting_to_the_elastic_cloud_waits_for_its_node_and_pays_the_idle_tail(transactional_db):
    fleet = parse_fleet(ELASTIC_FLEET, source="elastic")
    # the first fills on-prem for 3 hours; the second can only go to the cloud, whose node comes in 8 min
    jobs = [_job("fill", 0.0, 8, 3 * 3600.0), _job("burst", 60.0, 8, 3600.0)]
    run = replay_run("default", jobs, fleet, seed=3)
    burst = run.outcomes["burst"]
    assert burst.cluster == "cloud"
    assert burst.start_s - burst.dispatched_s == pytest.approx(480.0, abs=1.0)  # the node's delay
    metrics = compute(run, fleet)
    # 1 h x 8 GPUs of work, and 8 GPUs billed for the 8 min of provisioning and the 10 min idle tail
    assert metrics.gpu_hours["cloud"] == pytest.approx(8.0)
    assert metrics.cloud_spend == pytest.approx(4.0 * 8 * (1.0 + 18 / 60), rel=0.01)
