"""Cluster row config -> SlurmBackend (broker/backends/registry.py calls this)."""
from __future__ import annotations

import pytest

from broker.backends.base import Unavailable
from broker.backends.slurm import CommandTransport, RestTransport, SlurmBackend
from broker.backends.slurm.factory import slurm_backend_from_config


def test_cli_over_ssh_with_conventions():
    b = slurm_backend_from_config("hpc1", {
        "ssh_host": "login1", "partition": "gpu", "qos_by_priority": {"low": "scavenger"},
        "model_names": {"a100": "NVIDIA A100-SXM4-80GB"}, "gpu_memory_gb": {"A100": 40},
        "extra_sbatch_args": ["--export=NONE"], "gpu_classes": {"big": ["H100"]}}, timeout_s=7)
    assert isinstance(b, SlurmBackend) and b.cluster == "hpc1"
    assert isinstance(b.transport, CommandTransport)
    assert b.transport.prefix == ["ssh", "-o", "BatchMode=yes", "login1"] and b.transport.remote_shell
    assert b.transport.timeout_s == 7
    cfg = b.config
    assert cfg.default_partition == "gpu" and cfg.qos_by_priority == {"low": "scavenger"}
    assert cfg.gpu_memory_gb["a100"] == 40 and cfg.gpu_memory_gb["h100"] == 80
    assert cfg.extra_sbatch_args == ("--export=NONE",) and cfg.gpu_class_types == {"big": ("H100",)}


def test_default_gpu_classes_are_the_ones_the_broker_passes():
    b = slurm_backend_from_config("hpc1", {}, gpu_classes={"a100-80gb": ["A100"]})
    assert isinstance(b.transport, CommandTransport) and b.transport.prefix == []
    assert b.config.gpu_class_types == {"a100-80gb": ("A100",)}
    assert slurm_backend_from_config("hpc1", {}).config.gpu_class_types == {}  # none given: any GPU


def test_rest():
    b = slurm_backend_from_config("hpc1", {"transport": "rest", "rest_url": "http://s:6820",
                                           "api_version": "v0.0.38", "user_name": "svc"}, token="jwt")
    assert isinstance(b.transport, RestTransport)
    assert b.transport.api_version == "v0.0.38" and b.transport._headers()["X-SLURM-USER-TOKEN"] == "jwt"


@pytest.mark.parametrize("config,token,match", [
    ({"bogus": 1}, "", "unknown config keys"),
    ({"transport": "rest", "rest_url": "http://s"}, "", "needs a JWT"),
    ({"transport": "rest"}, "jwt", "needs rest_url"),
    ({"transport": "pyslurm"}, "", "unknown transport"),
    ({"partitions": "gpu"}, "", "must be a list"),
    ({"qos_by_priority": ["x"]}, "", "must be a mapping"),
])
def test_bad_config(config, token, match):
    with pytest.raises(Unavailable, match=match):
        slurm_backend_from_config("hpc1", config, token=token)
