"""Fixtures for the Kubernetes backend tests: an emulated cluster per test.

``harness`` is parametrised over Kueue and Volcano so that the contract tests
run once per backend kind; ``kueue`` / ``volcano`` give one kind only.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

import pytest

from broker.backends.base import ProjectIdentity
from broker.backends.kube import BackendSettings, KubeConfig, KueueBackend, VolcanoBackend
from tests.broker.backends.kube.emu.emulator import KubeEmulator
from tests.broker.backends.kube.emu.emulator_seed import (
    A100, NAMESPACE, seed_kueue, seed_nodes, seed_volcano)
from broker.backends.kube.jobs import KubeJobBackend
from broker.spec import WorkloadSpec

IDENTITY = ProjectIdentity(tenant="acme", project="proj", k8s_namespace=NAMESPACE)


def make_spec(**kw: Any) -> WorkloadSpec:
    base: dict[str, Any] = dict(project="proj", name="train", command="python train.py",
                                gpus_per_worker=1, workers=1, gpu_models=(A100,))
    base.update(kw)
    return WorkloadSpec(**base)


def fast_config(emu: KubeEmulator) -> KubeConfig:
    # 2 s: a loaded CI machine must not turn an ordinary answer into a timeout
    return KubeConfig(host=emu.url, connect_timeout_s=0.5, read_timeout_s=2.0)


@dataclass
class Harness:
    """One backend kind on one emulated cluster, with the controller hooks tests drive."""

    kind: str
    emu: KubeEmulator
    backend: KubeJobBackend
    identity: ProjectIdentity = IDENTITY

    @property
    def model(self) -> Any:
        return self.emu.kueue if self.kind == "kueue" else self.emu.volcano

    def step(self) -> None:
        self.model.reconcile()

    def finish(self, job_id: str, ok: bool = True) -> None:
        self.model.finish(job_id, ok)

    def job_objects(self) -> list[dict[str, Any]]:
        gp = ("batch", "jobs") if self.kind == "kueue" else ("batch.volcano.sh", "jobs")
        return self.emu.store.list(gp)

    def submit(self, workload_id: str = "wl-0001", **kw: Any) -> str:
        return self.backend.submit(make_spec(**kw), workload_id, self.identity)


def make_harness(kind: str, emu: KubeEmulator,
                 settings: BackendSettings | None = None) -> Harness:
    seed_nodes(emu)
    if kind == "kueue":
        seed_kueue(emu)
        backend: KubeJobBackend = KueueBackend("k8s-1", fast_config(emu), settings)
    else:
        seed_volcano(emu)
        backend = VolcanoBackend("k8s-1", fast_config(emu), settings)
    return Harness(kind, emu, backend)


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    emulator = KubeEmulator().start()
    emulator.slow_seconds = 4.0  # longer than fast_config's read timeout
    emulator.freeze(datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc))  # exact durations
    yield emulator
    emulator.stop()


@pytest.fixture
def spec_factory() -> Callable[..., WorkloadSpec]:
    return make_spec


@pytest.fixture(params=["kueue", "volcano"])
def harness(request: pytest.FixtureRequest, emu: KubeEmulator) -> Iterator[Harness]:
    h = make_harness(request.param, emu)
    yield h
    h.backend.close()


@pytest.fixture
def kueue(emu: KubeEmulator) -> Iterator[Harness]:
    h = make_harness("kueue", emu)
    yield h
    h.backend.close()


@pytest.fixture
def volcano(emu: KubeEmulator) -> Iterator[Harness]:
    h = make_harness("volcano", emu)
    yield h
    h.backend.close()
