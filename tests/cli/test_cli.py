"""The gpubroker CLI against a running portal: log in, submit, watch to completion, explain,
cancel, chargeback; and its errors and exit codes."""
from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path

import pytest

from gpubroker_cli import API_ERROR, BAD_ARGUMENTS, NO_CONNECTION, OK
from tests.cli.conftest import cli_command

SPEC = """\
name: {name}
command: python train.py
gpu_class: a100-80gb
gpus_per_worker: 2
workers: 1
time_limit_minutes: {minutes}
"""


def spec_file(tmp_path: Path, name: str, extra: str = "", minutes: int = 30) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, minutes=minutes) + extra)
    return str(path)


def login(gpubroker, server, who: str = "researcher") -> None:
    rc, out, err = gpubroker("login", "--url", server.url, "--token", server.tokens[who])
    assert rc == OK, err
    assert f"logged in as {who}" in out


def submitted_id(out: str) -> str:
    match = re.match(r"submitted (\d+) ", out)
    assert match, out
    return match.group(1)


def test_login_stores_the_url_and_token_readable_by_the_owner_only(server, gpubroker):
    login(gpubroker, server)
    assert stat.S_IMODE(gpubroker.config.stat().st_mode) == 0o600
    assert json.loads(gpubroker.config.read_text()) == {"url": server.url, "token": server.tokens["researcher"]}


def test_submit_watch_to_completion_status_explain_and_list(server, gpubroker, tmp_path):
    login(gpubroker, server)
    rc, out, err = gpubroker("submit", spec_file(tmp_path, "cli-train"), "--project", "lattice-qcd")
    assert rc == OK, err
    workload = submitted_id(out)

    rc, out, err = gpubroker("watch", workload, "--interval", "0.5", "--timeout", "90")
    assert rc == OK, f"{out}\n{err}\n{server.log.read_text()[-2000:]}"
    states = [line.split()[1] for line in out.splitlines()]
    assert states[-1] == "completed" and "running" in states
    changes = [line.split(None, 1)[1] for line in out.splitlines()]
    assert all(a != b for a, b in zip(changes, changes[1:]))  # one line per change, not one per poll

    rc, out, err = gpubroker("status", workload)
    assert rc == OK and "completed" in out and "cluster: " in out

    rc, out, err = gpubroker("explain", workload)
    assert rc == OK, err
    assert "Ranking" in out and re.search(r"^\s*1\s+onprem-", out, re.M), out

    rc, out, err = gpubroker("list", "--state", "completed")
    assert rc == OK and "cli-train" in out


def test_cancel_a_submitted_workload(server, gpubroker, tmp_path):
    login(gpubroker, server)
    # a long job (48 h limit: runs 24 simulated hours, over two minutes of wall time) is there to cancel
    rc, out, err = gpubroker("submit", spec_file(tmp_path, "cli-long", minutes=2880), "--project", "lattice-qcd")
    assert rc == OK, err
    workload = submitted_id(out)
    rc, out, err = gpubroker("cancel", workload)
    assert rc == OK, err
    assert re.search(r"cancel requested for \d+: (cancelling|cancelled)", out), out
    rc, out, err = gpubroker("watch", workload, "--interval", "0.5", "--timeout", "60")
    assert rc == API_ERROR and out.splitlines()[-1].split()[1] == "cancelled"


def test_chargeback_for_finance_as_a_table_and_csv(server, gpubroker):
    login(gpubroker, server, "finance")
    rc, out, err = gpubroker("chargeback", "--month", "2026-11")
    assert rc == OK, err
    assert out.splitlines()[0].split()[:5] == ["month", "tenant", "project", "user", "gpu_class"]
    assert out.splitlines()[-1].startswith("Total")
    rc, out, err = gpubroker("chargeback", "--month", "2026-11", "--csv")
    assert rc == OK and out.lstrip("\ufeff").splitlines()[0].lower().startswith("month,tenant,project")


def test_a_researcher_asking_for_chargeback_gets_the_api_error(server, gpubroker):
    login(gpubroker, server)
    rc, out, err = gpubroker("chargeback", "--month", "2026-11")
    assert rc == API_ERROR and "HTTP 403" in err


def test_unknown_field_is_refused_naming_the_field(server, gpubroker, tmp_path):
    login(gpubroker, server)
    rc, out, err = gpubroker("submit", spec_file(tmp_path, "typo", "gpu_per_worker: 8\n"), "--project", "lattice-qcd")
    assert rc == API_ERROR
    assert re.search(r"^\s+gpu_per_worker: ", err, re.M), err


def test_bad_token_is_exit_3(server, gpubroker):
    rc, out, err = gpubroker("list", env={"GPUBROKER_URL": server.url, "GPUBROKER_TOKEN": "gpb_not-a-real-token"})
    assert rc == NO_CONNECTION and "refused the token" in err


def test_no_server_is_exit_3(gpubroker):
    rc, out, err = gpubroker("list", env={"GPUBROKER_URL": "http://127.0.0.1:9", "GPUBROKER_TOKEN": "gpb_x"})
    assert rc == NO_CONNECTION and "cannot connect" in err


def test_not_logged_in_is_exit_3(gpubroker):
    rc, out, err = gpubroker("status", "1")
    assert rc == NO_CONNECTION and "gpubroker login" in err


@pytest.mark.parametrize("args", [["status", "not-a-number"], ["chargeback", "--month", "2026-13"], ["frobnicate"],
                                  ["watch", "1", "--interval", "0"]])
def test_bad_arguments_are_exit_2(gpubroker, args):
    rc, out, err = gpubroker(*args)
    assert rc == BAD_ARGUMENTS and "usage: gpubroker" in err


def test_unreadable_spec_file_is_exit_2(server, gpubroker, tmp_path):
    login(gpubroker, server)
    rc, out, err = gpubroker("submit", str(tmp_path / "missing.yaml"))
    assert rc == BAD_ARGUMENTS and "cannot read" in err
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    rc, out, err = gpubroker("submit", str(tmp_path / "list.yaml"))
    assert rc == BAD_ARGUMENTS and "expected a mapping" in err


def test_the_console_script_is_installed():
    assert Path(cli_command()[0]).name == "gpubroker", f"no console script beside {sys.executable}: pip install -e ."
