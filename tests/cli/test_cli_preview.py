"""gpubroker submit --dry-run: the preview, with nothing submitted; a bad field as on submit."""
from __future__ import annotations

from gpubroker_cli import API_ERROR, OK
from tests.cli.test_cli import login, spec_file


def test_dry_run_shows_where_it_would_go_and_submits_nothing(server, gpubroker, tmp_path):
    login(gpubroker, server)
    rc, before, err = gpubroker("list")
    assert rc == OK, err
    rc, out, err = gpubroker("submit", spec_file(tmp_path, "cli-look"), "--project", "lattice-qcd", "--dry-run")
    assert rc == OK, err
    assert out.startswith("dry run, nothing submitted;") and "would go to: " in out
    assert "quota left: " in out and "expected start" in out and "cost" in out
    rc, after, err = gpubroker("list")
    assert rc == OK and len(after.splitlines()) == len(before.splitlines()) and "cli-look" not in after


def test_dry_run_with_a_bad_field_is_refused_naming_it(server, gpubroker, tmp_path):
    login(gpubroker, server)
    rc, out, err = gpubroker("submit", spec_file(tmp_path, "cli-bad", extra="gpu_per_worker: 2\n"),
                             "--project", "lattice-qcd", "--dry-run")
    assert rc == API_ERROR and "gpu_per_worker" in err


def test_dry_run_and_budgets_show_the_gpu_hour_budget_the_job_counts_against(server, gpubroker, tmp_path):
    # the default policy's soft budget: physics, a100-80gb, 20,000 GPU-hours a month
    login(gpubroker, server)
    rc, out, err = gpubroker("submit", spec_file(tmp_path, "cli-budget"), "--project", "lattice-qcd", "--dry-run")
    assert rc == OK, err
    assert "budget physics a100-80gb per month: " in out and "of 20000.00 GPU-h (soft)" in out
    rc, out, err = gpubroker("budgets")
    assert rc == OK, err
    header, _rule, row = out.splitlines()[:3]
    assert "remaining" in header and "forecast" in header
    assert row.startswith("physics a100-80gb per month") and "20000.00" in row


def test_dry_run_of_a_gang_preferring_one_host_says_per_destination_whether_it_keeps_it(server, gpubroker, tmp_path):
    login(gpubroker, server)
    path = tmp_path / "cli-host.yaml"
    path.write_text("name: cli-host\ncommand: python train.py\ngpu_class: a100-80gb\ngpus_per_worker: 2\n"
                    "workers: 2\ntopology_level: host\ntopology_mode: preferred\n")
    rc, out, err = gpubroker("submit", str(path), "--project", "lattice-qcd", "--dry-run")
    assert rc == OK, err
    assert "preferred level" in out
    assert "in one host" in out


def test_a_topology_mode_the_broker_does_not_know_is_refused_naming_the_field(server, gpubroker, tmp_path):
    login(gpubroker, server)
    rc, out, err = gpubroker("submit", spec_file(tmp_path, "cli-mode", extra="topology_level: rack\ntopology_mode: soon\n"),
                             "--project", "lattice-qcd", "--dry-run")
    assert rc == API_ERROR and "topology_mode" in err
