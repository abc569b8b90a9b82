"""The control planes the compatibility suite runs on, each behind the same few questions the
tests ask: register the cluster for the broker, give a project an account (limited or not),
say which GPUs a job holds on which node, start and end a higher-priority local job.

Slurm: the test cluster of scripts/slurm-cluster, whichever version is up (22.05, 24.11.5,
26.05.5), through the broker's Slurm backend on its command transport (the REST transport
has a test of its own per version: test_every_offered_rest_api_version_...). Test tooling
only: the product knows nothing of it."""

from __future__ import annotations

import re
import subprocess
import uuid
from dataclasses import dataclass

from broker.models import Cluster

from tests.broker.backends.slurm.support import JOBDIR, sh


@dataclass
class SlurmPlane:
    """scripts/slurm-cluster's cluster: two nodes of 8 GPUs, account ``research`` limited to 4
    GPUs (GrpTRES), QoS ``compat-urgent`` that preempts normal-QoS jobs (PreemptMode=CANCEL)."""

    env: dict[str, str]
    transport: str = "cli"
    name: str = "slurm"
    gpus_per_node: int = 8
    nodes: int = 2
    limited_gpus: int = 4  # GrpTRES of the limited account
    limit_words: tuple[str, ...] = ("GrpTRES=gres/gpu=4", "at most 4 GPUs")  # the reason names the limit
    preempted_words: str = "preempted"
    preempted_state: str = "failed"  # PreemptMode=CANCEL ends the job PREEMPTED: the broker's attempt failed

    def register(self, settings) -> Cluster:
        settings.GPUBROKER_ENABLE_SLURM = True
        settings.GPUBROKER_ENABLE_SIMULATOR = False
        config = {"transport": self.transport, "partition": "gpu", "submit_user": "root", "image_pull_s": 0,
                  "workdir": str(JOBDIR)}
        return Cluster.objects.create(name=f"compat-{self.name}", kind="slurm", region="eu-west", location="onprem",
                                      config=config)

    def project_fields(self, *, limited: bool) -> dict[str, str]:
        # a fresh account each run (the broker creates it), or the one with a GPU limit
        return {"slurm_account": self.env.get("SLURM_CI_LIMITED_ACCOUNT", "research") if limited
                else "cp" + uuid.uuid4().hex[:8]}

    def gpus_on_nodes(self, job_id: str) -> dict[str, int]:
        """node -> GPUs the job holds there, from `scontrol -d show job` (its GRES per node)."""
        out = sh("scontrol", "-d", "show", "job", job_id)
        held: dict[str, int] = {}
        for nodes, gres in re.findall(r"^\s*Nodes=(\S+) CPU_IDs=.*?GRES=(\S+)", out, re.M):
            count = sum(int(n) for n in re.findall(r"gpu(?::[^:(]+)?:(\d+)", gres))
            for node in sh("scontrol", "show", "hostnames", nodes).split():
                held[node] = held.get(node, 0) + count
        return held

    def start_urgent_local_job(self, gpus_per_node: int) -> str:
        """A job submitted at the cluster, not through the broker, in the QoS that preempts."""
        out = sh("sbatch", "--parsable", "--qos", self.env.get("SLURM_CI_URGENT_QOS", "compat-urgent"),
                 "-A", self.env.get("SLURM_CI_ACCOUNT", "general"), "-p", "gpu", "-N", str(self.nodes),
                 f"--gres=gpu:{gpus_per_node}", "-t", "5", "-J", "compat-urgent", "-o", str(JOBDIR / "%j.out"),
                 "--wrap", "sleep 300")
        return out.strip().split(";")[0]

    def local_job_state(self, job_id: str) -> str:
        """squeue's state of the job; "" once squeue lists it no more (it answers an error)."""
        return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                              timeout=30).stdout.strip()

    def end_local_job(self, job_id: str) -> None:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30)

    def is_gone(self, job_id: str) -> bool:
        """The job runs no more at the cluster (squeue lists it no longer, or ended)."""
        return self.local_job_state(job_id) in ("", "CANCELLED", "COMPLETED", "FAILED", "PREEMPTED")
