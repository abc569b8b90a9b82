"""Builders for the replay tests: traces and fleets written in a few lines."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

from broker.fleet_file import FleetDescription, parse_fleet
from broker.replay.jobs import ReplayJob
from broker.replay.trace import COLUMNS

HEADER = ",".join(COLUMNS)
HERE = Path(__file__).parent


def busy_slice(n: int, rng, *, gap_s: int, minutes: tuple[int, int], gang_every: int, gang_gpus, single_gpus
               ) -> list[ReplayJob]:
    """``n`` A100-80GB jobs of three tenants arriving every 0-``gap_s`` s, running ``minutes``
    (low, high), every ``gang_every``-th a 2-worker gang of ``gang_gpus()`` GPUs each."""
    jobs, at = [], 0.0
    for i in range(n):
        at += float(rng.randint(0, gap_s))
        gang = i % gang_every == gang_every - 1
        jobs.append(ReplayJob(
            key=f"j{i:03d}", submit_s=at, tenant=f"t{i % 3}", gpu_class="a100-80gb", min_memory_gb=80,
            gpus_per_worker=gang_gpus() if gang else single_gpus(), workers=2 if gang else 1,
            duration_s=float(rng.randint(*minutes) * 60),
        ))
    return jobs


def pytest_collection_modifyitems(items):
    """Every test here is a ``replay`` test: CI runs them apart from the main run (.ci/run)."""
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.replay)


# Two A100-80GB clusters.  "frag" comes first in the file and has small nodes, so a few
# 3-GPU jobs leave one GPU free on each: free GPUs summed say a 2x2 gang fits, but no
# node holds two.  "roomy" is in the cloud with two whole 8-GPU nodes.
FRAGMENTED_FLEET = """
clusters:
  - name: frag
    kind: simulator
    flavor: slurm
    region: eu-west
    location: onprem
    price_per_gpu_hour: 1.0
    nodes:
      - {count: 4, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 4, name_prefix: frag-}
  - name: roomy
    kind: simulator
    flavor: kueue
    region: eu-central
    location: cloud
    price_per_gpu_hour: 3.6
    image_pull_s: 60
    provisioning_s: 240
    nodes:
      - {count: 2, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 8, name_prefix: roomy-}
"""

# Four 3-GPU jobs that fragment "frag", then a 2x2 gang.
FRAGMENTING_TRACE = [
    "fill-1,0,alice,G2,3,1,3600,Succeeded",
    "fill-2,0,alice,G2,3,1,3600,Succeeded",
    "fill-3,0,alice,G2,3,1,3600,Succeeded",
    "fill-4,0,alice,G2,3,1,3600,Succeeded",
    "gang-1,10,bob,G2,2,2,600,Succeeded",
]


def write_trace(path: Path, rows: Sequence[str], header: str = HEADER) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def trace_file(tmp_path):
    def _make(rows: Sequence[str], name: str = "trace.csv", header: str = HEADER) -> Path:
        return write_trace(tmp_path / name, rows, header)
    return _make


@pytest.fixture
def fleet_file(tmp_path):
    def _make(text: str = FRAGMENTED_FLEET, name: str = "fleet.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path
    return _make


@pytest.fixture
def fragmented_fleet() -> FleetDescription:
    return parse_fleet(FRAGMENTED_FLEET, source="fragmented")
