"""The one switch of the tests against real control planes (this folder and mk_dispatcher/).

K8S_TESTS=1 runs them; without it they skip, saying how to start the clusters.  With it they
never skip: an env file that is missing (clusters not up) is a failure."""
from __future__ import annotations

import os

import pytest

from tests.broker.backends.slurm.support import load_env_file


def enabled() -> bool:
    return os.environ.get("K8S_TESTS") == "1"


def skip_k8s_test_when_off(request: pytest.FixtureRequest, off: str) -> None:
    if request.node.get_closest_marker("k8s") is not None and not enabled():
        pytest.skip(off)


def cluster_env(variable: str, default: str, *, off: str, start: str) -> dict[str, str]:
    """The env file the cluster script wrote (path from ``variable``, else ``default``)."""
    # session fixtures are set up before the autouse gate: gate here too
    if not enabled():
        pytest.skip(off)
    path = os.environ.get(variable, default)
    if not os.path.exists(path):
        pytest.fail(f"K8S_TESTS=1 but {path} does not exist: {start}")
    return load_env_file(path)
