"""Slurm backend: SlurmBackend over a Transport (CLI commands or slurmrestd).

    from broker.backends.slurm import SlurmBackend, SlurmConfig, CommandTransport, RestTransport
    backend = SlurmBackend("hpc1", CommandTransport(prefix=["ssh", "login1"], timeout_s=30),
                           SlurmConfig(default_partition="gpu"))

See docs/slurm.md.
"""

from broker.backends.slurm.backend import AccountStatus, SlurmBackend
from broker.backends.slurm.commands import CommandTransport
from broker.backends.slurm.config import SlurmConfig
from broker.backends.slurm.mapping import SubmitRequest, build_request, rest_job_body, sbatch_args
from broker.backends.slurm.rest import RestTransport
from broker.backends.slurm.transport import Transport

__all__ = [
    "AccountStatus",
    "CommandTransport",
    "RestTransport",
    "SlurmBackend",
    "SlurmConfig",
    "SubmitRequest",
    "Transport",
    "build_request",
    "rest_job_body",
    "sbatch_args",
]
