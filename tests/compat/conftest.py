"""The compatibility suite's planes: one fixture, a parameter per control plane, each with the
marker of the CI lane that has that plane (the `slurm` lane runs it on every Slurm version)."""

from __future__ import annotations

import os

import pytest

from broker.backends.slurm.fields import strict_fields
from tests.broker.backends.slurm.support import DEFAULT_ENV_FILE, JOBDIR, load_env_file
from tests.compat.planes import SlurmPlane


def _slurm() -> SlurmPlane:
    if os.environ.get("SLURM_TESTS") != "1":
        pytest.skip("the real Slurm cluster: run `scripts/slurm-cluster up` and set SLURM_TESTS=1")
    path = os.environ.get("SLURM_CI_ENV", DEFAULT_ENV_FILE)
    if not os.path.exists(path):
        pytest.fail(f"SLURM_TESTS=1 but {path} does not exist: run `scripts/slurm-cluster up` first")
    JOBDIR.mkdir(parents=True, exist_ok=True)
    return SlurmPlane(env={**{k: v for k, v in os.environ.items() if k.startswith("SLURM")}, **load_env_file(path)})


@pytest.fixture(params=[pytest.param("slurm", marks=pytest.mark.slurm)])
def plane(request):
    made = {"slurm": _slurm}[request.param]()
    # every field the cluster answers must be known to the parsers, as in the backend's tests
    with strict_fields():
        yield made
