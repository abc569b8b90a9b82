"""Fixtures for the Slurm backend tests.

Parser, mapping and transport tests run anywhere.  Tests marked ``slurm`` need the real
single-host cluster (``scripts/slurm-cluster up``) and run only with SLURM_TESTS=1;
without it they skip with a message saying so.  With SLURM_TESTS=1 they never skip:
a cluster that is not up makes them fail.

Every test here reads Slurm in strict mode (fields.strict_fields): a field the parsers
do not know fails the test, where production would keep it and log it once.
"""
from __future__ import annotations

import os

import pytest

from broker.backends.slurm.fields import strict_fields

from .support import DEFAULT_ENV_FILE, JOBDIR, load_env_file


@pytest.fixture(autouse=True)
def _strict_slurm_fields():
    with strict_fields():
        yield


@pytest.fixture(autouse=True)
def _slurm_gate(request):
    if request.node.get_closest_marker("slurm") is None:
        return
    if os.environ.get("SLURM_TESTS") != "1":
        pytest.skip("real Slurm cluster tests are off: run `scripts/slurm-cluster up` and set "
                    "SLURM_TESTS=1 to run them")


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    """The cluster's env file (SLURM_CI_ENV, default /run/slurm-ci/env) over os.environ."""
    path = os.environ.get("SLURM_CI_ENV", DEFAULT_ENV_FILE)
    if not os.path.exists(path):
        pytest.fail(f"SLURM_TESTS=1 but {path} does not exist: run `scripts/slurm-cluster up` first")
    env = {k: v for k, v in os.environ.items() if k.startswith("SLURM") and v}
    env.update(load_env_file(path))  # the file written by the last `up` wins (fresh token)
    # a job whose output file cannot be opened fails to launch (JobLaunchFailure): on a new
    # machine, whichever test submits first must find the folder there
    JOBDIR.mkdir(parents=True, exist_ok=True)
    return env
