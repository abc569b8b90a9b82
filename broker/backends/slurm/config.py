"""Settings of one Slurm destination that are not part of the workload spec."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

# Memory per GPU, by lower-case Slurm GRES type, for NodeInventory.gpu_memory_gb (Slurm
# does not report it).  MIG types carry their memory in the name ("1g.10gb" -> 10).
DEFAULT_GPU_MEMORY_GB: Mapping[str, int] = {
    "a100": 80,
    "a100-80gb": 80,
    "a100-40gb": 40,
    "a100_40gb": 40,
    "h100": 80,
    "h200": 141,
    "gh200": 96,
    "b200": 180,
    "l40s": 48,
    "l40": 48,
    "a40": 48,
    "a30": 24,
    "a10": 24,
    "l4": 24,
    "v100": 32,
    "t4": 16,
    "rtx6000": 24,
    "mi250x": 128,
    "mi300x": 192,
}


@dataclass(frozen=True)
class SlurmConfig:
    """Where and how jobs go on one Slurm cluster.

    Account: ``ProjectIdentity.slurm_account``, else ``default_account``, else the
    user's default account.  Partition: ``partition_by_gpu_type[type]`` (``["shard"]`` for a
    job of GPU shares), else ``default_partition``, else the cluster's default partition.  QoS:
    ``qos_by_priority[spec.priority]``, else ``default_qos``, else the association's
    default QoS.
    """

    default_account: str = ""
    default_partition: str = ""
    partition_by_gpu_type: Mapping[str, str] = field(default_factory=dict)
    default_qos: str = ""
    qos_by_priority: Mapping[str, str] = field(default_factory=dict)
    # spec GPU model names -> Slurm GRES type ("NVIDIA A100-SXM4-80GB" -> "a100");
    # without an entry the model name is lower-cased
    gpu_type_aliases: Mapping[str, str] = field(default_factory=dict)
    # Slurm GRES type -> the broker's model name in inventory and usage ("a100" ->
    # "NVIDIA A100-SXM4-80GB"); also read backwards when mapping spec models to types.
    # Without an entry the GRES type itself is the model name.
    model_names: Mapping[str, str] = field(default_factory=dict)
    # spec.gpu_class -> acceptable Slurm GRES types (or model names), preferred first
    gpu_class_types: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    gpu_memory_gb: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_GPU_MEMORY_GB))
    workdir: str = ""  # --chdir; "" = where sbatch runs (REST: /tmp)
    output: str = ""  # --output pattern, e.g. "slurm-%j.out"; "" = Slurm default
    output_dir: str = ""  # without output: --output=<output_dir>/slurm-%j.out
    multi_node_launch: str = "srun"  # "srun": run the command once per worker; "none": as is
    submit_held: bool = False  # --hold (benchmarks, staged starts)
    extra_sbatch_args: tuple[str, ...] = ()
    rest_environment: Mapping[str, str] = field(default_factory=lambda: {"PATH": "/usr/local/bin:/usr/bin:/bin"})
    rest_job_extra: Mapping[str, object] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()  # inventory: only these partitions ("" = all)
    find_lookback_days: int = 30  # how far back find() searches accounting
    cancel_confirm_s: float = 15.0  # cancel(): how long to wait for the ended state
    throughput_window_s: int = 3600  # QueueStats.gpu_hours_per_hour window; 0 = skip
    interconnect_domain: str = ""
    owner: str = "slurm"
