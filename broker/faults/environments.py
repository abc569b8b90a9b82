"""Where the fault harness runs its workloads: three simulated clusters on one manual
clock, or the real single-host Slurm cluster with slurmctld really stopped and started."""

from __future__ import annotations

import random
import time
from datetime import datetime, timedelta, timezone as dt_timezone
from typing import Any

from broker.faults.points import CRASH_POINTS

# Every row the harness makes is named with this prefix (its clusters, users, workloads).
PREFIX = "fh-"


class SimEnvironment:
    """Three simulated clusters (Slurm, Kueue and Volcano flavours) on one manual clock."""

    mode = "simulator"
    supports = tuple(p.name for p in CRASH_POINTS)

    def __init__(self, rng: random.Random):
        from broker.backends.sim import NodeGroup, Partition, SimClock, SimulatorFleet

        self.rng = rng
        self.fleet = SimulatorFleet.reset(clock=SimClock())
        self.clock = self.fleet.clock
        a100: dict[str, Any] = dict(gpu_model="A100", gpu_memory_gb=80, gpus_per_node=8)
        self.fleet.add_cluster(
            f"{PREFIX}slurm",
            "slurm",
            node_groups=[NodeGroup(count=3, name_prefix=f"{PREFIX}s-", interconnect_domain="ib-1", **a100)],
            partitions=[Partition("gpu", default=True, max_gpus_per_job=16)],
        )
        self.fleet.add_cluster(
            f"{PREFIX}kueue", "kueue", node_groups=[NodeGroup(count=2, name_prefix=f"{PREFIX}k-", quota=16, **a100)]
        )
        self.fleet.add_cluster(
            f"{PREFIX}volcano", "volcano", node_groups=[NodeGroup(count=2, name_prefix=f"{PREFIX}v-", **a100)]
        )
        self.cluster_specs = [
            dict(name=f"{PREFIX}slurm", price="1.0", location="onprem"),
            dict(name=f"{PREFIX}kueue", price="1.5", location="onprem"),
            dict(name=f"{PREFIX}volcano", price="3.0", location="cloud"),
        ]
        from broker.faults.truth import SimTruth

        self.truth = SimTruth([c["name"] for c in self.cluster_specs])

    def now(self) -> datetime:
        return self.clock.now()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def builders(self) -> dict:
        return {}

    retime = None

    def register(self) -> list:
        from decimal import Decimal

        from broker.models import Cluster

        rows = []
        for spec in self.cluster_specs:
            rows.append(
                Cluster.objects.create(
                    name=spec["name"],
                    kind="simulator",
                    region="eu-west",
                    location=spec["location"],
                    price_per_gpu_hour=Decimal(spec["price"]),
                    config={"image_pull_s": 0},
                )
            )
        return rows

    def inject_orphan(self, cluster: str) -> tuple[str, str]:
        job_id = self.fleet.get(cluster).inject_foreign_job(
            name="foreign", gpus_per_worker=1, account="unknown", duration_s=self.rng.uniform(300, 1200)
        )
        return cluster, job_id

    def lose_next_job(self, cluster: str) -> None:
        self.fleet.get(cluster).set_faults(loses_job=True)

    def controller(self, cluster: str, up: bool) -> None:
        """The cluster's controller stops or starts (here: the network path, see FaultPlan.unreachable)."""

    def job_seconds(self) -> tuple[int, str]:
        return self.rng.choice((5, 10, 15, 20, 30)), "python train.py"

    def close(self) -> None:
        pass


class SlurmEnvironment:
    """The real single-host Slurm cluster (scripts/slurm-cluster up): one destination,
    jobs that sleep a few seconds, and slurmctld really stopped and started."""

    mode = "slurm"
    supports = tuple(p.name for p in CRASH_POINTS if p.name != "lost_job")
    NAME = f"{PREFIX}slurm-ci"

    def __init__(self, rng: random.Random):
        from broker.faults.truth import SlurmTruth

        self.rng = rng
        self.offset = 0.0
        self.started = datetime.now(dt_timezone.utc)
        self.truth = SlurmTruth(self.NAME, self.started)
        self.cluster_specs = [dict(name=self.NAME)]
        self.real_restarts = 0

    def now(self) -> datetime:
        return datetime.now(dt_timezone.utc) + timedelta(seconds=self.offset)

    def advance(self, seconds: float) -> None:
        self.offset += seconds

    def retime(self) -> datetime:
        return self.now()

    def builders(self) -> dict:
        from broker.backends.slurm import CommandTransport, SlurmBackend, SlurmConfig

        def build(cluster):
            return SlurmBackend(
                cluster.name,
                CommandTransport(timeout_s=20),
                SlurmConfig(
                    default_account="general",
                    partitions=("gpu",),
                    gpu_class_types={"a100-80gb": ("a100",)},
                    cancel_confirm_s=5,
                    throughput_window_s=0,
                    workdir="/tmp",
                ),
            )

        return {"slurm": build}

    def register(self) -> list:
        from decimal import Decimal

        from broker.models import Cluster

        return [
            Cluster.objects.create(
                name=self.NAME,
                kind="slurm",
                region="eu-west",
                location="onprem",
                price_per_gpu_hour=Decimal("1.0"),
                config={"image_pull_s": 0},
            )
        ]

    def inject_orphan(self, cluster: str) -> tuple[str, str]:
        import subprocess

        out = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "-J",
                "foreign-job",
                "-A",
                "general",
                "-p",
                "gpu",
                "--gres=gpu:a100:1",
                "-c",
                "1",
                "--mem=100",
                "-t",
                "2",
                "-D",
                "/tmp",
                "-o",
                "/dev/null",
                "--wrap",
                f"sleep {self.rng.randint(5, 20)}",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        job_id = out.stdout.strip().split(";")[0]
        if out.returncode != 0 or not job_id:
            raise RuntimeError(f"sbatch of a foreign job failed: {out.stderr.strip()}")
        self.truth.extra_ids.add(job_id)
        return cluster, job_id

    def lose_next_job(self, cluster: str) -> None:
        raise NotImplementedError("Slurm does not lose jobs on request")

    def controller(self, cluster: str, up: bool) -> None:
        """Really stop or start slurmctld (bounded waits)."""
        import subprocess
        from pathlib import Path

        script = Path(__file__).resolve().parents[2] / "scripts" / "slurm-cluster"
        if not up:
            subprocess.run([str(script), "down", "slurmctld"], capture_output=True, timeout=60)
            return
        subprocess.run(["slurmctld"], capture_output=True, timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20)
            if "is UP" in ping.stdout:
                self.real_restarts += 1
                return
            time.sleep(0.5)
        raise RuntimeError("slurmctld did not come back within 60 s")

    def job_seconds(self) -> tuple[int, str]:
        return 2, f"sleep {self.rng.randint(3, 15)}"

    def close(self) -> None:
        import subprocess

        subprocess.run(["scancel", "-n", ",".join(["foreign-job"])], capture_output=True, timeout=30)


def harness_user(username: str, is_staff: bool = False):
    """Harness users never log in: no password to hash."""
    from django.contrib.auth import get_user_model

    user, created = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": is_staff})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def harness_tenants(*, slurm: bool) -> tuple:
    """Two tenants, each with a project, a researcher and a quota of A100s: (gpu class, tenants)."""
    from broker.models import Quota
    from broker.services.fleet.registration import gpu_classes_from_policy
    from portal.tenancy.models import Role
    from portal.tenancy.services.tenants import member_ensure, project_ensure, tenant_ensure

    gpu_class = {c.slug: c for c in gpu_classes_from_policy()}["a100-80gb"]
    tenants = []
    for i, limit in enumerate((16, 12) if not slurm else (8, 6)):
        tenant = tenant_ensure(slug=f"{PREFIX}t{i}", name=f"Harness tenant {i}")
        project = project_ensure(
            tenant=tenant,
            slug=f"{PREFIX}p{i}",
            name=f"Harness project {i}",
            slurm_account=("general", "research")[i] if slurm else f"fhp{i}",
            k8s_namespace=f"{PREFIX}p{i}",
            cost_centre=f"FH-{i}",
        )
        user = harness_user(f"{PREFIX}researcher{i}")
        member_ensure(user=user, tenant=tenant, role=Role.RESEARCHER)
        Quota.objects.update_or_create(
            tenant=tenant, gpu_class=gpu_class, defaults={"limit_gpus": limit, "borrow_limit_gpus": 4}
        )
        tenants.append((tenant, project, user))
    return gpu_class, tenants
