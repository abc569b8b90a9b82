"""The compatibility suite's planes: one fixture, a parameter per control plane, each with the
marker of the CI lane that has that plane (the `slurm` lane runs it on every Slurm version;
the `k8s` lane on Kueue, with kueue.x-k8s.io/v1beta1 served and unserved, and on Volcano)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import pytest

from broker.backends.slurm.fields import strict_fields
from tests.broker.backends.kube.real import api_versions as versions
from tests.broker.backends.kube.real import cluster as kube
from tests.broker.backends.kube.real.gate import cluster_env
from tests.broker.backends.slurm.support import DEFAULT_ENV_FILE, JOBDIR, load_env_file
from tests.compat.planes import (
    PLANES,
    KueuePlane,
    SlurmPlane,
    SlurmRequeuePlane,
    VolcanoPlane,
    compat_objects,
    remove_blockers,
    remove_compat_objects,
    remove_volcano_compat_objects,
    volcano_compat_objects,
)


def _slurm() -> SlurmPlane:
    if os.environ.get("SLURM_TESTS") != "1":
        pytest.skip("the real Slurm cluster: run `scripts/slurm-cluster up` and set SLURM_TESTS=1")
    path = os.environ.get("SLURM_CI_ENV", DEFAULT_ENV_FILE)
    if not os.path.exists(path):
        pytest.fail(f"SLURM_TESTS=1 but {path} does not exist: run `scripts/slurm-cluster up` first")
    JOBDIR.mkdir(parents=True, exist_ok=True)
    return SlurmPlane(env={**{k: v for k, v in os.environ.items() if k.startswith("SLURM")}, **load_env_file(path)})


@pytest.fixture(scope="session")
def kueue_session() -> Iterator[tuple[dict[str, str], object]]:
    """The main cluster for the session, v1beta1 served or not as the run asks
    (K8S_KUEUE_V1BETA1=unserved: the lane's second run): switched once for the session, as
    the Kueue tests' own session does, never back and forth between tests."""
    env = cluster_env("K8S_CI_ENV", "/run/k8s-ci/env",
                      off="real Kubernetes tests are off: run `scripts/k8s-cluster up` and set K8S_TESTS=1",
                      start="run `scripts/k8s-cluster up` first")
    with versions.as_the_run_asks(env, ("K8S_MAIN_KUBECONFIG",)):
        api = kube.api_client(env["K8S_MAIN_KUBECONFIG"])
        try:
            yield env, api
        finally:
            api.close()


@contextmanager
def _kueue(request) -> Iterator[KueuePlane]:
    env, api = request.getfixturevalue("kueue_session")
    kube.apply(api, *kube.kueue_nodes(), *kube.kueue_objects(), *compat_objects())
    kube.delete_jobs(api)
    try:
        yield KueuePlane(env=env, api=api)
    finally:
        kube.delete_jobs(api)
        remove_compat_objects(api)  # the other Kueue tests read the cluster's queues


@contextmanager
def _volcano(request) -> Iterator[VolcanoPlane]:
    env, api = request.getfixturevalue("kueue_session")
    assert env.get("K8S_VOLCANO") == "1", "Volcano is not running in the main cluster (K8S_CI_NO_VOLCANO set?)"
    kube.apply(api, *volcano_compat_objects())
    kube.delete_jobs(api)
    try:
        yield VolcanoPlane(env=env, api=api)
    finally:
        remove_blockers(api)
        kube.delete_jobs(api)
        remove_volcano_compat_objects(api)


@contextmanager
def _slurm_plane(request) -> Iterator[SlurmPlane]:
    plane = _slurm()
    # every field the cluster answers must be known to the parsers, as in the backend's tests
    with strict_fields():
        yield plane


@contextmanager
def _slurm_requeue_plane(request) -> Iterator[SlurmPlane]:
    with _slurm_plane(request) as plane:
        yield SlurmRequeuePlane(env=plane.env)


@pytest.fixture(params=list(PLANES.values()))
def plane(request):
    """Each plane; a test may name its own list (``indirect``), as the preemption test does."""
    made_by = {"slurm": _slurm_plane, "slurm-requeue": _slurm_requeue_plane, "kueue": _kueue, "volcano": _volcano}
    with made_by[request.param](request) as made:
        yield made
