"""WorkloadSpec -> Slurm job request.  The only place that decides what a job asks Slurm for.

``build_request`` makes a transport-neutral ``SubmitRequest``; ``sbatch_args`` renders
it for sbatch (the batch script goes on stdin), ``rest_job_body`` for slurmrestd.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

from broker.backends.base import ProjectIdentity, Rejected
from broker.backends.slurm.config import SlurmConfig
from broker.backends.slurm.output import output_pattern
from broker import preflight
from broker.spec import MIG_PROFILE_RE, WorkloadSpec

SHARD = "shard"  # Slurm's GRES of GPU shares; partition_by_gpu_type["shard"] names their partition
_SAFE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")
_POSIX_NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


@dataclass(frozen=True)
class SubmitRequest:
    workload_id: str  # job name and comment
    script: str  # the batch script, "#!/bin/bash" first
    gres: str  # "gpu:a100:2" / "gpu:2" / "shard:2": per node
    nodes: int
    tasks_per_node: int
    cpus_per_task: int
    mem_per_node_mb: int
    time_minutes: int
    account: str = ""
    partition: str = ""
    qos: str = ""
    workdir: str = ""
    output: str = ""
    hold: bool = False
    run_as_user: str = ""  # submit as this POSIX user (the project's jobs run as the person)
    run_as_group: str = ""
    # a gang that must share an interconnect domain: at most this many leaf switches (Slurm's
    # --switches, which the topology/tree plugin honours and the others ignore); 0: no bound
    switches: int = 0
    # nodes the broker holds back (their GPUs failed a job's pre-flight check): --exclude
    exclude: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    rest_extra: Mapping[str, Any] = field(default_factory=dict)
    rest_environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpus_per_node(self) -> int:
        return int(self.gres.rsplit(":", 1)[-1])

    @property
    def gpu_type(self) -> str:
        parts = self.gres.split(":")
        return parts[1] if len(parts) == 3 else ""


def gpu_type_for(spec: WorkloadSpec, config: SlurmConfig, known_types: Collection[str] | None = None) -> str:
    """The Slurm GRES type to ask for ("" = any GPU).

    MIG profile -> that profile (or the known type ending in it, e.g. ``a100_1g.10gb``);
    else the first accepted model (lower-case, or its alias) that the cluster has, else
    the first; else the GPU class's configured types."""
    known = {t.lower() for t in known_types} if known_types else None
    reverse = {v.lower(): k for k, v in config.model_names.items()}

    def alias(name: str) -> str:
        return (
            config.gpu_type_aliases.get(name)
            or config.gpu_type_aliases.get(name.lower())
            or reverse.get(name.lower())
            or name
        ).lower()

    if spec.mig_profile:
        profile = alias(spec.mig_profile)
        if known and profile not in known:
            models = [alias(m) for m in spec.gpu_models]
            for t in sorted(known):
                if t.endswith(profile) and (not models or any(t.startswith(m) for m in models)):
                    return t
        return profile
    candidates = [alias(m) for m in spec.gpu_models]
    if not candidates and spec.gpu_class:
        candidates = [alias(t) for t in config.gpu_class_types.get(spec.gpu_class, ())]
    if not candidates:
        return ""
    if known:
        for t in candidates:
            if t in known:
                return t
    return candidates[0]


def batch_script(spec: WorkloadSpec, workload_id: str, config: SlurmConfig) -> str:
    # the pre-flight check first, on each worker's node: SLURM_NODEID is the worker's rank
    # (one task a node), SLURMD_NODENAME the node Slurm calls it
    check = preflight.prelude(spec, rank="${SLURM_NODEID:-0}", node="${SLURMD_NODENAME:-$(hostname)}")
    command = check + spec.command.replace("\r\n", "\n")
    lines = ["#!/bin/bash", f"# gpubroker workload {workload_id}"]
    if spec.workers > 1 and config.multi_node_launch == "srun":
        # one copy of the command per worker node, inside the allocation
        lines.append("srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c " + shlex.quote(command))
    else:
        lines.append(command)
    return "\n".join(lines) + "\n"


def build_request(
    spec: WorkloadSpec,
    workload_id: str,
    identity: ProjectIdentity,
    config: SlurmConfig,
    known_types: Collection[str] | None = None,
) -> SubmitRequest:
    if not _SAFE_ID_RE.match(workload_id):
        raise Rejected(f"workload id {workload_id!r} cannot be a Slurm job name")
    if spec.mig_profile and not MIG_PROFILE_RE.match(spec.mig_profile):
        raise Rejected(f"bad MIG profile {spec.mig_profile!r}")
    if identity.run_as_person and not identity.run_as_user:
        raise Rejected(f"jobs of {identity.project} run as the person, who has no cluster identity")
    for name in (identity.run_as_user, identity.run_as_group):
        if name and not _POSIX_NAME_RE.match(name):
            raise Rejected(f"{name!r} is not a POSIX name")
    if spec.gpu_share:  # shares of a GPU: Slurm's gres/shard, of whichever GPU the node has
        gtype, gres = SHARD, f"{SHARD}:{spec.gpus_per_worker}"
    else:
        gtype = gpu_type_for(spec, config, known_types)
        gres = f"gpu:{gtype}:{spec.gpus_per_worker}" if gtype else f"gpu:{spec.gpus_per_worker}"
    return SubmitRequest(
        workload_id=workload_id,
        script=batch_script(spec, workload_id, config),
        gres=gres,
        nodes=spec.workers,
        tasks_per_node=1,
        cpus_per_task=spec.cpus_per_worker,
        mem_per_node_mb=spec.memory_gb_per_worker * 1024,
        time_minutes=spec.time_limit_minutes,
        account=identity.slurm_account or config.default_account,
        partition=config.partition_by_gpu_type.get(gtype, "") or config.default_partition,
        qos=(
            config.qos_by_priority.get(spec.priority_class, "")
            or config.qos_by_priority.get(spec.priority, "")
            or config.default_qos
        ),
        workdir=config.workdir,
        output=output_pattern(config),
        hold=config.submit_held,
        run_as_user=identity.run_as_user,
        run_as_group=identity.run_as_group,
        switches=1 if spec.one_domain or _under_one_switch(spec.level_required) else 0,
        exclude=tuple(spec.exclude_nodes),
        extra_args=tuple(config.extra_sbatch_args),
        rest_extra=dict(config.rest_job_extra),
        rest_environment=dict(config.rest_environment),
    )


def sbatch_args(req: SubmitRequest) -> list[str]:
    """sbatch's argument list (without the program name); the script goes on stdin."""
    args = [
        "--parsable",
        f"--job-name={req.workload_id}",
        f"--comment={req.workload_id}",
    ]
    if req.account:
        args.append(f"--account={req.account}")
    if req.partition:
        args.append(f"--partition={req.partition}")
    if req.qos:
        args.append(f"--qos={req.qos}")
    args += [
        f"--nodes={req.nodes}",
        f"--ntasks-per-node={req.tasks_per_node}",
        f"--cpus-per-task={req.cpus_per_task}",
        f"--mem={req.mem_per_node_mb}M",
        f"--time={req.time_minutes}",
        f"--gres={req.gres}",
    ]
    if req.workdir:
        args.append(f"--chdir={req.workdir}")
    if req.output:
        args.append(f"--output={req.output}")
    if req.hold:
        args.append("--hold")
    if req.switches:
        args.append(f"--switches={req.switches}")  # waits up to the site's max_switch_wait
    if req.exclude:
        args.append("--exclude=" + ",".join(req.exclude))
    # the broker's account must be privileged (root or SlurmUser) for Slurm to accept these
    if req.run_as_user:
        args.append(f"--uid={req.run_as_user}")
    if req.run_as_group:
        args.append(f"--gid={req.run_as_group}")
    args += list(req.extra_args)
    return args


def api_minor(api_version: str) -> int:
    """ "v0.0.38" -> 38."""
    m = re.match(r"^v?0\.0\.(\d+)$", api_version.strip())
    if not m:
        raise ValueError(f"not a Slurm REST API version: {api_version!r}")
    return int(m.group(1))


def rest_job_body(req: SubmitRequest, api_version: str) -> dict[str, Any]:
    """The body of ``POST /slurm/<api_version>/job/submit``.

    v0.0.38 (22.05) and older: script beside the job, environment as an object, plain
    numbers, ``nodes`` as [min, max], ``gres``.  v0.0.39+ (23.02+): the script inside
    the job, environment as "K=V" strings, numbers as {set, number}, ``nodes`` as text,
    ``tres_per_node``."""
    minor = api_minor(api_version)
    cwd = req.workdir or "/tmp"
    env = dict(req.rest_environment) or {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    job: dict[str, Any] = {
        "name": req.workload_id,
        "comment": req.workload_id,
        "tasks_per_node": req.tasks_per_node,
        "tasks": req.nodes * req.tasks_per_node,
        "cpus_per_task": req.cpus_per_task,
        "current_working_directory": cwd,
    }
    for key in ("account", "partition", "qos"):
        if getattr(req, key):
            job[key] = getattr(req, key)
    if req.output:
        job["standard_output"] = req.output
    if req.hold:
        job["hold"] = True
    if req.switches and minor > 38:
        # v0.0.38 (22.05) refuses the key ("Disabled key: required_switches"): there only
        # sbatch carries the bound (docs/topology.md)
        job["required_switches"] = req.switches
    if req.exclude and minor >= 40:
        # a list from v0.0.40 on (a comma-separated CSV_STRING); v0.0.38 and v0.0.39 are not
        # told: placement still keeps the node out (docs/topology.md)
        job["excluded_nodes"] = list(req.exclude)
    if minor <= 38:
        job.update(
            {
                "nodes": [req.nodes, req.nodes],
                "memory_per_node": req.mem_per_node_mb,
                "time_limit": req.time_minutes,
                "gres": req.gres,
                "environment": env,
            }
        )
        job.update(req.rest_extra)
        return {"script": req.script, "job": job}

    def num(n: int) -> dict[str, Any]:
        return {"set": True, "infinite": False, "number": n}

    job.update(
        {
            "script": req.script,
            "nodes": str(req.nodes),
            "memory_per_node": num(req.mem_per_node_mb),
            "time_limit": num(req.time_minutes),
            "tres_per_node": "gres/" + req.gres,
            "environment": [f"{k}={v}" for k, v in env.items()],
        }
    )
    job.update(req.rest_extra)
    return {"job": job}


def _under_one_switch(level: str) -> bool:
    """A required level Slurm keeps with ``--switches=1``: a leaf switch (``rack``, ``switch
    level 0``), or a wider switch level, which one leaf switch satisfies the stricter way
    (Slurm has no bound for a subtree above the leaves). ``host``: never more than one
    worker a node here, so placement sends no such gang; ``block``: not passed on yet."""
    return level == "rack" or level.startswith("switch level ")
