"""Helpers shared by the Slurm backend tests (fixture files, env file)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
from contextlib import contextmanager
from typing import Iterator

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
DEFAULT_ENV_FILE = "/run/slurm-ci/env"
# where the real cluster's test jobs run and write their output (on this host: both nodes)
JOBDIR = pathlib.Path(os.environ.get("SLURM_TEST_JOBDIR", "/tmp/slurm-ci-jobs"))
CLUSTER_SCRIPT = pathlib.Path(__file__).resolve().parents[4] / "scripts" / "slurm-cluster"


@contextmanager
def in_profile(name: str) -> Iterator[list[str]]:
    """The test cluster in a scenario's profile (``scripts/slurm-cluster profile NAME``) for
    one test: the job ids the test appends are cancelled and the default put back after it."""
    subprocess.run(["bash", str(CLUSTER_SCRIPT), "profile", name], check=True, capture_output=True, timeout=180)
    ids: list[str] = []
    try:
        yield ids
    finally:
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=30)
        subprocess.run(["bash", str(CLUSTER_SCRIPT), "profile", "default"], check=True, capture_output=True,
                       timeout=180)


def read_fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def read_json_fixture(name: str) -> dict:
    text = read_fixture(name)
    # rest-submit.json was captured with curl -w, which appended "HTTP 200"
    return json.loads(text[: text.rfind("}") + 1])


def load_env_file(path: str) -> dict[str, str]:
    env: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _, value = line.partition("=")
            env[key.removeprefix("export ").strip()] = value.strip().strip("'\"")
    return env


def sh(*argv: str, timeout: float = 30) -> str:
    """A command's output; a failure fails the test with its stderr."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv}: {proc.stderr}"
    return proc.stdout
