"""Build a SlurmBackend from a Cluster row's ``config`` (never secrets) and token.

Called by broker/backends/registry.py.  Config keys (all optional):

- transport: ``transport`` ("cli", the default, or "rest").
- cli: ``prefix`` (argument list, e.g. ["ssh", "-o", "BatchMode=yes", "login1"]) or
  ``ssh_host`` (shorthand for that prefix), ``remote_shell``, ``bin_dir``.
- rest: ``rest_url`` (required), ``api_version`` ("auto" by default), ``user_name``
  (default $SLURM_REST_USER or the process user).  The resolved credentials are the JWT.
- ``metrics_url``: slurmctld's OpenMetrics (25.11+, e.g. "http://slurmctld:6817"): each
  node's allocated GPUs come from ``/metrics/nodes`` while it answers (metrics.py).
- job output: read through the cli transport; for rest (slurmrestd serves no files),
  through ``logs_prefix`` (an argument list; [] reads on the broker's machine) or
  ``logs_ssh_host``.
- conventions (SlurmConfig): ``account``/``default_account``, ``partition``/
  ``default_partition``, ``qos``/``default_qos``, ``partition_by_gpu_type``,
  ``qos_by_priority``, ``gpu_type_aliases``, ``model_names``, ``gpu_classes`` ({class:
  [models or GRES types]}; default: the classes the broker passes in, those of the policy in
  force), ``gpu_memory_gb`` (merged
  over the defaults), ``workdir``, ``output`` (only %j, %x, %A, %%: the broker must name
  the file to read it), ``output_dir``, ``multi_node_launch``, ``submit_held``,
  ``extra_sbatch_args``, ``rest_environment``, ``rest_job_extra``, ``partitions``,
  ``find_lookback_days``, ``cancel_confirm_s``, ``throughput_window_s``,
  ``interconnect_domain``, ``owner``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from broker.backends.base import Unavailable
from broker.backends.slurm.backend import SlurmBackend
from broker.backends.slurm.commands import CommandTransport
from broker.backends.slurm.config import DEFAULT_GPU_MEMORY_GB, SlurmConfig
from broker.backends.slurm.metrics import NodeMetrics
from broker.backends.slurm.output import OutputReader, check_pattern
from broker.backends.slurm.rest import RestTransport
from broker.backends.slurm.transport import Transport

_TRANSPORT = {
    "transport",
    "prefix",
    "ssh_host",
    "remote_shell",
    "bin_dir",
    "rest_url",
    "api_version",
    "user_name",
    "logs_prefix",
    "logs_ssh_host",
    "metrics_url",
}
_ALIASES = {
    "account": "default_account",
    "partition": "default_partition",
    "qos": "default_qos",
    "gpu_classes": "gpu_class_types",
}
_MAPPINGS = {
    "partition_by_gpu_type",
    "qos_by_priority",
    "gpu_type_aliases",
    "model_names",
    "gpu_class_types",
    "gpu_memory_gb",
    "rest_environment",
    "rest_job_extra",
}
_TUPLES = {"extra_sbatch_args", "partitions"}
_SCALARS = {
    "default_account",
    "default_partition",
    "default_qos",
    "workdir",
    "output",
    "output_dir",
    "multi_node_launch",
    "submit_held",
    "find_lookback_days",
    "cancel_confirm_s",
    "throughput_window_s",
    "interconnect_domain",
    "owner",
}


def slurm_config(raw: Mapping[str, Any], gpu_classes: Mapping[str, Sequence[str]] | None = None) -> SlurmConfig:
    """``gpu_classes``: the broker's classes, so a class-only spec still picks a GRES type
    (none: it asks for any GPU); the config's own ``gpu_classes`` key wins."""
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _TRANSPORT:
            continue
        key = _ALIASES.get(key, key)
        if key in _MAPPINGS:
            if not isinstance(value, Mapping):
                raise ValueError(f"{key} must be a mapping")
            values[key] = dict(value)
        elif key in _TUPLES:
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                raise ValueError(f"{key} must be a list")
            values[key] = tuple(str(v) for v in value)
        elif key in _SCALARS:
            values[key] = value
    classes = values.get("gpu_class_types", gpu_classes or {})
    values["gpu_class_types"] = {k: tuple(v) for k, v in classes.items()}
    check_pattern(str(values.get("output", "")))
    if "gpu_memory_gb" in values:
        values["gpu_memory_gb"] = {
            **DEFAULT_GPU_MEMORY_GB,
            **{k.lower(): int(v) for k, v in values["gpu_memory_gb"].items()},
        }
    return SlurmConfig(**values)


def slurm_backend_from_config(
    cluster: str,
    config: Mapping[str, Any],
    token: str = "",
    timeout_s: float = 20.0,
    gpu_classes: Mapping[str, Sequence[str]] | None = None,
) -> SlurmBackend:
    """The backend for one cluster; a bad config raises Unavailable saying which key.
    ``gpu_classes`` come from the broker (the registry passes the policy in force's)."""
    known = _TRANSPORT | set(_ALIASES) | _MAPPINGS | _TUPLES | _SCALARS
    unknown = set(config) - known
    if unknown:
        raise Unavailable(f"cluster {cluster}: unknown config keys {sorted(unknown)}")
    try:
        settings = slurm_config(config, gpu_classes)
    except (TypeError, ValueError, AttributeError) as exc:
        raise Unavailable(f"cluster {cluster}: invalid config: {exc}") from exc
    kind = str(config.get("transport", "cli"))
    transport: Transport
    if kind == "cli":
        prefix = list(config.get("prefix") or ())
        if not prefix and config.get("ssh_host"):
            prefix = ["ssh", "-o", "BatchMode=yes", str(config["ssh_host"])]
        transport = CommandTransport(
            prefix=prefix,
            timeout_s=timeout_s,
            remote_shell=config.get("remote_shell"),
            bin_dir=str(config.get("bin_dir", "")),
        )
    elif kind == "rest":
        if not config.get("rest_url"):
            raise Unavailable(f"cluster {cluster}: transport rest needs rest_url")
        if not token:
            raise Unavailable(f"cluster {cluster}: transport rest needs a JWT (credentials_ref)")
        transport = RestTransport(
            str(config["rest_url"]),
            lambda: token,
            str(config.get("api_version", "auto")),
            user_name=config.get("user_name"),
            timeout_s=timeout_s,
        )
    else:
        raise Unavailable(f"cluster {cluster}: unknown transport {kind!r} (cli or rest)")
    metrics = NodeMetrics(str(config["metrics_url"]), timeout_s) if config.get("metrics_url") else None
    return SlurmBackend(cluster, transport, settings, _output_reader(config, transport, timeout_s), metrics)


def _output_reader(config: Mapping[str, Any], transport: Any, timeout_s: float) -> OutputReader | None:
    """Job output is read where the jobs write it: through the command transport itself,
    or (slurmrestd serves no files) through ``logs_prefix`` / ``logs_ssh_host``."""
    prefix = list(config.get("logs_prefix") or ())
    if not prefix and config.get("logs_ssh_host"):
        prefix = ["ssh", "-o", "BatchMode=yes", str(config["logs_ssh_host"])]
    if prefix or "logs_prefix" in config:  # an empty logs_prefix: read on this machine
        return OutputReader(CommandTransport(prefix=prefix, timeout_s=timeout_s))
    return OutputReader(transport) if isinstance(transport, CommandTransport) else None
