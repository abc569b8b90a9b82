"""The compose stack for the `stack` tests: docker-compose.yml as a site runs it, brought up
once per session with podman-compose (STACK_TESTS=1; images from scripts/images), with the real
Slurm test cluster (scripts/slurm-cluster up, slurmrestd reachable from containers:
SLURM_CI_REST_BIND=0.0.0.0) as its one cluster. Torn down at the end, volumes included."""

from __future__ import annotations

import json
import os
import secrets
import socket
import time

import pytest

from tests.ops.stack.client import Person
from tests.ops.stack.compose import ROOT, WEB_SERVICES, Stack

SLURM_ENV = os.environ.get("SLURM_CI_ENV", "/run/slurm-ci/env")
CLUSTER = "stack-slurm"
RESEARCHERS = int(os.environ.get("GPUBROKER_STACK_RESEARCHERS", "10"))
# the beat's intervals in the stack: short, so that a smoke run takes a minute, not an hour
INTERVALS = {"GPUBROKER_INVENTORY_INTERVAL_S": "5", "GPUBROKER_STATUS_INTERVAL_S": "2",
             "GPUBROKER_RECONCILE_INTERVAL_S": "10", "GPUBROKER_USAGE_INTERVAL_S": "15",
             "GPUBROKER_SAMPLE_INTERVAL_S": "10"}


def _slurm_env() -> dict[str, str]:
    if not os.path.exists(SLURM_ENV):
        pytest.fail(f"{SLURM_ENV} does not exist: run `SLURM_CI_REST_BIND=0.0.0.0 scripts/slurm-cluster up` first")
    return dict(line.split("=", 1) for line in open(SLURM_ENV).read().splitlines() if "=" in line)


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=3):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def stack():
    if os.environ.get("STACK_TESTS") != "1":
        pytest.skip("the compose stack: set STACK_TESTS=1 (podman, podman-compose, scripts/images, real Slurm)")
    slurm = _slurm_env()
    port = int(os.environ.get("GPUBROKER_STACK_PORT", "18443"))
    env = {"GPUBROKER_SECRET_KEY": secrets.token_urlsafe(48), "GPUBROKER_HTTPS_PORT": str(port),
           "GPUBROKER_ENABLE_SLURM": "true", "SLURM_JWT": slurm["SLURM_JWT"],
           "GPUBROKER_METRICS_TOKEN": secrets.token_urlsafe(24), "GPUBROKER_LOG_FORMAT": "json", **INTERVALS}
    s = Stack(project=os.environ.get("GPUBROKER_STACK_PROJECT", "gpubroker-stack-ci"), port=port, env=env)
    s.down()  # what a run before this one left
    try:
        t0 = time.monotonic()
        try:
            s.up()
        except RuntimeError as exc:
            # no test holds the stack yet, so pytest_runtest_makereport cannot print its report
            raise RuntimeError(f"{exc}\n{s.network_report()}") from exc
        s.up_seconds = time.monotonic() - t0
        gateway = s.gateway()
        rest_port = int(slurm["SLURMRESTD_URL"].rsplit(":", 1)[1])
        if not _reachable(gateway, rest_port):
            pytest.fail(f"slurmrestd is not reachable at {gateway}:{rest_port} from the containers' network: "
                        "start the cluster with SLURM_CI_REST_BIND=0.0.0.0")
        people = [(f"stack-r{n}", secrets.token_urlsafe(12)) for n in range(max(RESEARCHERS, 2))]
        # one researcher the load never uses: what the outage test charges is theirs alone
        quiet = ("stack-quiet", secrets.token_urlsafe(12))
        seed = {"cluster": CLUSTER, "slurm_url": f"http://{gateway}:{rest_port}", "researchers": [*people, quiet],
                "staff": ["stack-finance", secrets.token_urlsafe(12)], "tenants": 1, "quota": 64}
        out = s.manage_shell(open(os.path.join(os.path.dirname(__file__), "seed.py")).read(),
                             STACK_SEED=json.dumps(seed))
        line = next(x for x in out.splitlines() if x.startswith("STACK_SEEDED "))
        s.projects = json.loads(line.split(" ", 1)[1])
        s.people = people
        s.quiet = quiet
        s.staff = tuple(seed["staff"])
        s.slurm = slurm
        s.cluster = CLUSTER
        yield s
    finally:
        if os.environ.get("GPUBROKER_STACK_KEEP") != "1":
            s.down()


@pytest.fixture
def researcher(stack):
    name, password = stack.people[0]
    return Person(stack.url, name, password, cert=stack.cert), stack.projects[name]


@pytest.fixture
def finance(stack):
    return Person(stack.url, *stack.staff, cert=stack.cert)


@pytest.fixture(autouse=True)
def settled(stack):
    """Each stack test starts on a whole stack: every app container running and the proxy
    routing to both web processes (a test before it may have stopped, killed or restarted
    some; a web process that has just started is not yet behind the proxy)."""
    stack.wait_healthy()
    stack.wait_serving(*WEB_SERVICES)


def pytest_collection_modifyitems(items):
    """The smoke tests first, on the stack as brought up; the fault tests, which kill and
    restart its parts, after them."""
    items.sort(key=lambda item: "tests/ops/stack/test_faults.py" in item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed stack test carries the network report (compose.Stack.network_report) in its
    output and in test-artifacts/stack-diagnostics.txt, which CI prints: what the containers
    and their DNS looked like when it failed, on a machine nobody can log in to afterwards."""
    outcome = yield
    report = outcome.get_result()
    stack = item.funcargs.get("stack") if hasattr(item, "funcargs") else None
    if not report.failed or stack is None:
        return
    try:
        text = stack.network_report()
    except Exception as exc:  # the report must never hide the failure it explains
        text = f"network report failed: {exc!r}"
    report.sections.append(("stack network report", text))
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    with open(artifacts / "stack-diagnostics.txt", "a") as f:
        f.write(f"== {item.nodeid} ({report.when})\n{text}\n")
