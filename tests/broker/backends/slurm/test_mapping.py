"""WorkloadSpec -> sbatch arguments and slurmrestd job bodies."""
from __future__ import annotations

import pytest

from broker.backends.base import ProjectIdentity, Rejected
from broker.backends.slurm.config import SlurmConfig
from broker.backends.slurm.mapping import build_request, gpu_type_for, rest_job_body, sbatch_args
from broker.spec import WorkloadSpec

IDENT = ProjectIdentity(tenant="t", project="p", slurm_account="research")


def spec(**kw) -> WorkloadSpec:
    base = dict(project="p", name="train", command="python train.py --lr 0.1", gpus_per_worker=2,
                workers=1, gpu_models=("A100",), cpus_per_worker=8, memory_gb_per_worker=64,
                time_limit_minutes=90)
    base.update(kw)
    return WorkloadSpec(**base)


def test_sbatch_args_single_node():
    req = build_request(spec(), "wl-abc", IDENT, SlurmConfig(default_partition="gpu", default_qos="normal"))
    assert sbatch_args(req) == [
        "--parsable", "--job-name=wl-abc", "--comment=wl-abc", "--account=research",
        "--partition=gpu", "--qos=normal", "--nodes=1", "--ntasks-per-node=1",
        "--cpus-per-task=8", "--mem=65536M", "--time=90", "--gres=gpu:a100:2",
    ]
    assert req.script == "#!/bin/bash\n# gpubroker workload wl-abc\npython train.py --lr 0.1\n"


def test_multi_node_runs_command_per_worker():
    req = build_request(spec(workers=4, command="echo 'hi'; sleep 1"), "wl-m", IDENT, SlurmConfig())
    assert "--nodes=4" in sbatch_args(req)
    assert req.script.splitlines()[-1] == (
        "srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c 'echo '\"'\"'hi'\"'\"'; sleep 1'")
    plain = build_request(spec(workers=4), "wl-m", IDENT, SlurmConfig(multi_node_launch="none"))
    assert plain.script.splitlines()[-1] == "python train.py --lr 0.1"


def test_defaults_and_omissions():
    req = build_request(spec(gpu_models=(), gpu_class="any"), "wl-x",
                        ProjectIdentity(tenant="t", project="p"), SlurmConfig())
    args = sbatch_args(req)
    assert "--gres=gpu:2" in args
    assert not [a for a in args if a.startswith(("--account", "--partition", "--qos"))]
    req = build_request(spec(), "wl-x", ProjectIdentity(tenant="t", project="p"),
                        SlurmConfig(default_account="fallback"))
    assert "--account=fallback" in sbatch_args(req)


def test_partition_and_qos_from_config():
    cfg = SlurmConfig(default_partition="gpu", partition_by_gpu_type={"h100": "hopper"},
                      default_qos="normal", qos_by_priority={"low": "scavenger", "high": "urgent"})
    args = sbatch_args(build_request(spec(gpu_models=("H100",), priority="low"), "wl-x", IDENT, cfg))
    assert "--partition=hopper" in args and "--qos=scavenger" in args
    args = sbatch_args(build_request(spec(priority="normal"), "wl-x", IDENT, cfg))
    assert "--partition=gpu" in args and "--qos=normal" in args


def test_a_fleet_priority_class_named_at_slurm_runs_at_its_qos_over_the_levels():
    cfg = SlurmConfig(default_qos="normal", qos_by_priority={"high": "urgent", "production": "prod"})
    assert "--qos=prod" in sbatch_args(build_request(spec(priority="high", priority_class="production"), "wl-x",
                                                     IDENT, cfg))
    # a class the cluster does not name runs at its level's QoS
    assert "--qos=urgent" in sbatch_args(build_request(spec(priority="high", priority_class="rush"), "wl-x",
                                                       IDENT, cfg))


def test_workdir_output_hold_extra():
    cfg = SlurmConfig(workdir="/scratch/jobs", output="slurm-%j.out", submit_held=True,
                      extra_sbatch_args=("--export=NONE",))
    args = sbatch_args(build_request(spec(), "wl-x", IDENT, cfg))
    assert args[-4:] == ["--chdir=/scratch/jobs", "--output=slurm-%j.out", "--hold", "--export=NONE"]


def test_gpu_type_choice():
    cfg = SlurmConfig(gpu_type_aliases={"NVIDIA H100 80GB HBM3": "h100"},
                      gpu_class_types={"big": ("h100", "a100")})
    assert gpu_type_for(spec(gpu_models=("NVIDIA H100 80GB HBM3",)), cfg) == "h100"
    assert gpu_type_for(spec(gpu_models=("H100", "A100")), cfg, {"a100"}) == "a100"
    assert gpu_type_for(spec(gpu_models=("H100", "A100")), cfg, None) == "h100"
    assert gpu_type_for(spec(gpu_models=(), gpu_class="big"), cfg, {"a100"}) == "a100"
    assert gpu_type_for(spec(gpu_models=(), gpu_class="unknown"), cfg) == ""
    # MIG: the profile, or the cluster's type that ends with it
    assert gpu_type_for(spec(mig_profile="1g.10gb", gpus_per_worker=3), cfg) == "1g.10gb"
    assert gpu_type_for(spec(mig_profile="1g.10gb"), cfg, {"a100_1g.10gb", "a100"}) == "a100_1g.10gb"
    req = build_request(spec(mig_profile="1g.10gb", gpus_per_worker=3), "wl-x", IDENT, cfg)
    assert req.gres == "gpu:1g.10gb:3"


def test_bad_workload_id_is_rejected():
    with pytest.raises(Rejected):
        build_request(spec(), "wl bad id; rm -rf /", IDENT, SlurmConfig())


def test_rest_body_v0038():
    req = build_request(spec(workers=2), "wl-abc", IDENT, SlurmConfig(default_partition="gpu"))
    body = rest_job_body(req, "v0.0.38")
    assert body["script"] == req.script
    job = body["job"]
    assert job["nodes"] == [2, 2] and job["tasks"] == 2 and job["tasks_per_node"] == 1
    assert job["gres"] == "gpu:a100:2" and job["memory_per_node"] == 65536 and job["time_limit"] == 90
    assert job["name"] == job["comment"] == "wl-abc"
    assert job["account"] == "research" and job["partition"] == "gpu"
    assert job["environment"] == {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    assert job["current_working_directory"] == "/tmp"


def test_rest_body_v0041():
    req = build_request(spec(workers=2), "wl-abc", IDENT, SlurmConfig(workdir="/w", submit_held=True))
    body = rest_job_body(req, "v0.0.41")
    assert "script" not in body
    job = body["job"]
    assert job["script"] == req.script
    assert job["nodes"] == "2"
    assert job["memory_per_node"] == {"set": True, "infinite": False, "number": 65536}
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 90}
    assert job["tres_per_node"] == "gres/gpu:a100:2"
    assert job["environment"] == ["PATH=/usr/local/bin:/usr/bin:/bin"]
    assert job["hold"] is True and job["current_working_directory"] == "/w"
    with pytest.raises(ValueError):
        rest_job_body(req, "latest")


def test_a_gang_that_must_share_an_interconnect_asks_slurm_for_one_switch():
    gang = build_request(spec(workers=2, same_interconnect=True), "wl-g", IDENT, SlurmConfig())
    assert "--switches=1" in sbatch_args(gang)
    assert "required_switches" not in rest_job_body(gang, "v0.0.38")["job"]  # 22.05's REST disables the key
    assert rest_job_body(gang, "v0.0.42")["job"]["required_switches"] == 1
    loose = build_request(spec(workers=2), "wl-l", IDENT, SlurmConfig())
    assert not [a for a in sbatch_args(loose) if a.startswith("--switches")]
    assert "required_switches" not in rest_job_body(loose, "v0.0.42")["job"]


@pytest.mark.parametrize("level, switches", [("rack", True), ("switch level 0", True), ("switch level 1", True),
                                             ("block", False), ("host", False)])
def test_a_required_switch_level_asks_slurm_for_one_leaf_switch(level, switches):
    req = build_request(spec(workers=2, topology_level=level), "wl-g", IDENT, SlurmConfig())
    assert ("--switches=1" in sbatch_args(req)) is switches
    preferred = build_request(spec(workers=2, topology_level=level, topology_mode="preferred"), "wl-p", IDENT,
                              SlurmConfig())
    # topology/tree already picks the fewest switches that fit: a preference needs no flag
    assert not [a for a in sbatch_args(preferred) if a.startswith("--switches")]


def test_the_gpu_check_runs_in_each_worker_before_the_command_and_only_when_asked():
    checked = build_request(spec(workers=2, gpu_check=True), "wl-c", IDENT, SlurmConfig()).script
    srun_line = [line for line in checked.splitlines() if line.startswith("srun ")]
    assert srun_line and "GPU check failed on worker ${SLURM_NODEID:-0}" in checked
    assert checked.index("exit 86") < checked.index("python train.py")  # the check first, inside srun
    plain = build_request(spec(workers=2), "wl-p", IDENT, SlurmConfig()).script
    assert "GPU check" not in plain


def test_nodes_the_broker_holds_back_are_excluded_in_sbatch_and_over_rest_from_v0040():
    req = build_request(spec(exclude_nodes=("n2", "n3")), "wl-x", IDENT, SlurmConfig())
    assert "--exclude=n2,n3" in sbatch_args(req)
    assert rest_job_body(req, "v0.0.41")["job"]["excluded_nodes"] == ["n2", "n3"]
    assert "excluded_nodes" not in rest_job_body(req, "v0.0.38")["job"]
    assert not [a for a in sbatch_args(build_request(spec(), "wl-y", IDENT, SlurmConfig())) if "exclude" in a]
