"""slurmctld's OpenMetrics (Slurm 25.11+) as the source of each node's allocated GPUs: the
captured 26.05 page, the fallback where it does not answer, and (marker slurm) the running
cluster, whose inventory is the same read either way."""
from __future__ import annotations

import logging
import subprocess

import pytest
import requests

from broker.backends.slurm import CommandTransport, SlurmBackend, SlurmConfig
from broker.backends.slurm.factory import slurm_backend_from_config
from broker.backends.slurm.metrics import NodeGpus, NodeMetrics, parse_node_gpus

from .support import JOBDIR, read_fixture, sh
from .test_backend import ReplayTransport
from .test_integration import wait_for


class Answer:
    def __init__(self, status: int, text: str = "", error: Exception | None = None):
        self.status, self.text, self.error = status, text, error
        self.asked: list[str] = []

    def get(self, url, timeout):
        self.asked.append(url)
        if self.error:
            raise self.error
        return type("Reply", (), {"status_code": self.status, "text": self.text})()


def test_the_captured_26_05_page_gives_each_nodes_gpus_and_their_allocation():
    assert parse_node_gpus(read_fixture("26.05/metrics-nodes.txt")) == {
        "n1": NodeGpus(total=8, allocated=3), "n2": NodeGpus(total=8, allocated=0)}


def test_inventory_takes_the_allocation_from_the_metrics_where_they_answer():
    page = read_fixture("26.05/metrics-nodes.txt")  # n1: 3 of 8 allocated, n2: none
    backend = SlurmBackend("ci", ReplayTransport(), SlurmConfig(throughput_window_s=0),
                           node_metrics=NodeMetrics("http://ctld:6817/", session=Answer(200, page)))
    pool = backend.inventory().pools[1]
    assert [(n.name, n.gpus_allocated) for n in pool.nodes] == [("n1", 3), ("n2", 0)]
    assert backend.node_metrics.session.asked == ["http://ctld:6817/metrics/nodes"]


@pytest.mark.parametrize("answer", [Answer(404, "Not found"), Answer(200, "# HELP nothing\n"),
                                    Answer(0, error=requests.ConnectionError("refused"))],
                         ids=["404", "no-gpu-samples", "refused"])
def test_without_an_answer_the_nodes_gres_are_read_and_it_is_said_once(answer, caplog):
    metrics = NodeMetrics("http://ctld:6817", session=answer)
    backend = SlurmBackend("ci", ReplayTransport(), SlurmConfig(throughput_window_s=0), node_metrics=metrics)
    with caplog.at_level(logging.WARNING, logger="broker.backends.slurm.metrics"):
        pools = [backend.inventory().pools[1] for _ in range(2)]
    assert [[n.gpus_allocated for n in p.nodes] for p in pools] == [[4, 4], [4, 4]]  # scontrol's GresUsed
    assert len(caplog.records) == 1 and "reading the nodes' GRES instead" in caplog.records[0].getMessage()


def test_a_cluster_config_names_the_metrics_url():
    backend = slurm_backend_from_config("ci", {"metrics_url": "http://ctld:6817"})
    assert backend.node_metrics is not None and backend.node_metrics.url == "http://ctld:6817/metrics/nodes"
    assert slurm_backend_from_config("ci", {}).node_metrics is None


@pytest.mark.slurm
def test_real_cluster_inventory_is_the_same_with_and_without_its_metrics(slurm_env):
    version = sh("sinfo", "--version").split()[1]
    metrics = NodeMetrics("http://127.0.0.1:6817", timeout_s=5)
    transport = CommandTransport(timeout_s=20, bin_dir=slurm_env.get("SLURM_BIN_DIR", ""))
    job = sh("sbatch", "--parsable", f"--chdir={JOBDIR}", "--mem=256M", "--account=general", "-w", "n1",
             "--gres=gpu:a100:3", "-J", "ext-metrics", "--wrap", "sleep 60").split(";")[0].strip()
    try:
        wait_for(lambda: sh("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING", f"job {job} running")
        with_metrics = SlurmBackend("ci", transport, node_metrics=metrics).inventory()
        counted = metrics.read()
        without = SlurmBackend("ci", transport).inventory()
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=30)
    allocated = {p.name: [n.gpus_allocated for n in p.nodes] for p in without.pools}
    assert {p.name: [n.gpus_allocated for n in p.nodes] for p in with_metrics.pools} == allocated
    assert allocated["gpu/a100"][0] >= 3
    if tuple(int(x) for x in version.split(".")[:2]) >= (25, 11):  # the endpoint answered
        assert counted is not None and counted["n1"].allocated == allocated["gpu/a100"][0]
    else:  # 22.05 and 24.11 have none: the inventory read the nodes
        assert counted is None
