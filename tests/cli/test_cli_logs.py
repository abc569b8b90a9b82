"""gpubroker logs: a workload's output from the start, its tail, following it to the end;
gpubroker status says how it ended."""
from __future__ import annotations

from gpubroker_cli import OK
from tests.cli.test_cli import login, spec_file, submitted_id


def test_logs_from_the_start_the_tail_and_followed_to_the_end(server, gpubroker, tmp_path):
    login(gpubroker, server)
    rc, out, err = gpubroker("submit", spec_file(tmp_path, "cli-logs"), "--project", "lattice-qcd")
    assert rc == OK, err
    workload = submitted_id(out)

    rc, followed, err = gpubroker("logs", workload, "--follow", "--interval", "0.5")
    assert rc == OK, err
    assert followed.splitlines()[-1] == "worker 0: exited with code 0"  # it stops once the job has ended

    rc, out, err = gpubroker("logs", workload)
    assert rc == OK and out == followed and out.startswith("worker 0 starting on ")
    rc, out, err = gpubroker("logs", workload, "--tail", "2")
    assert rc == OK and out.splitlines() == followed.splitlines()[-2:]

    rc, out, err = gpubroker("status", workload)
    assert rc == OK and "how it ended: exited with code 0 [" in out and "GPU-hours" in out


def test_logs_are_refused_to_a_role_that_may_not_read_them(server, gpubroker):
    login(gpubroker, server, "finance")  # a member of the tenant, without a workload role: 403, not 404
    rc, out, err = gpubroker("logs", "1")
    assert rc != OK and "403" in err and not out
