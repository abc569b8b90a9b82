"""Build the backend for a cluster row.

This is the only place the broker's models meet the backends: it turns a
Cluster row into a backend's own config, resolves the credentials reference,
and checks the per-backend enable flags.  Backends never see the ORM, the settings or
the policy: what they need of them (timeouts, the GPU classes of the policy in force,
the simulated fleet's file and clock speed) is handed to them from here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ContextManager

from django.conf import settings

from broker import runtime
from broker.backends.base import Backend, BackendError, ProjectIdentity, Unavailable
from broker.backends.guard import GuardedBackend
from broker.backends.kube.factory import kube_backend_from_config
from broker.backends.sim.simulated_clusters import FleetSource, SimulatorFleet
from broker.backends.simulator import SimulatorBackend
from broker.backends.slurm.factory import slurm_backend_from_config
from broker.services.fleet.policy import current_policy
from portal.identity.selectors import cluster_identity_of
from portal.tenancy.models import RunAs

_ENABLE_FLAG = {
    "simulator": "GPUBROKER_ENABLE_SIMULATOR",
    "slurm": "GPUBROKER_ENABLE_SLURM",
    "kueue": "GPUBROKER_ENABLE_KUEUE",
    "multikueue": "GPUBROKER_ENABLE_KUEUE",
    "volcano": "GPUBROKER_ENABLE_VOLCANO",
}


# Keys of Cluster.config the broker itself reads (placement facts, identity): every
# other key belongs to the backend, which refuses keys it does not know.
BROKER_CONFIG_KEYS = frozenset(
    {
        "image_pull_s",
        "provisioning_s",
        "elastic_pools",
        "data_locations",
        "bandwidth_gbps",
        "default_bandwidth_gbps",
        "node_domain",
        "submit_user",
        "flavor",
        "dispatcher",
    }
)


def backend_config(cluster) -> dict:
    return {k: v for k, v in (cluster.config or {}).items() if k not in BROKER_CONFIG_KEYS}


def resolve_credentials(ref: str) -> str:
    """Read a secret by reference (env:NAME or file:/path); the secret is never stored."""
    if not ref:
        return ""
    scheme, _, target = ref.partition(":")
    if scheme == "env":
        value = os.environ.get(target)
        if value is None:
            raise Unavailable(f"credentials: environment variable {target} is not set")
        return value.strip()
    if scheme == "file":
        try:
            return Path(target).read_text().strip()
        except OSError as exc:
            raise Unavailable(f"credentials: cannot read {target}: {exc.strerror}") from None
    raise Unavailable(f"credentials: unknown reference scheme {scheme!r}")


def identity_for(project, submitted_by=None) -> ProjectIdentity:
    """The project's identity; with ``run_as`` person, also the submitter's own."""
    person = project.run_as == RunAs.PERSON
    own = cluster_identity_of(submitted_by) if person else None
    return ProjectIdentity(
        tenant=project.tenant.slug,
        project=project.slug,
        slurm_account=project.slurm_account,
        k8s_namespace=project.k8s_namespace,
        cost_centre=project.cost_centre,
        queue=project.k8s_queue,
        run_as_person=person,
        run_as_user=own.posix_user if own else "",
        run_as_group=own.posix_group if own else "",
        k8s_user=own.k8s_user if own else "",
    )


# A run that brings its own destinations (the fault harness's faulty or journal clusters) says
# how to build a cluster's backend through the runtime seam (``broker.runtime``,
# ``build_backend``), given the registry's own builder, instead of editing the builder table.
Override = Callable[[Any, Callable[[Any], Backend]], Backend]


def backend_override(build: Override) -> ContextManager[runtime.Runtime]:
    """Until the block ends, ``backend_for`` builds with ``build(cluster, default)``;
    ``default`` is the builder in force before (the registry's own, or an outer override's)."""
    outer = runtime.current().build_backend

    def composed(cluster: Any, own: Callable[[Any], Backend]) -> Backend:
        default = own if outer is None else (lambda c: outer(c, own))
        return build(cluster, default)

    return runtime.override(build_backend=composed)


def backend_for(cluster) -> Backend:
    flag = _ENABLE_FLAG.get(cluster.kind)
    if flag is None:
        raise Unavailable(f"cluster {cluster.name}: unknown backend kind {cluster.kind!r}")
    if not getattr(settings, flag):
        raise Unavailable(f"cluster {cluster.name}: {cluster.kind} backend disabled ({flag}=false)")
    builder = _BUILDERS[cluster.kind]
    override = runtime.current().build_backend
    try:
        return GuardedBackend(builder(cluster) if override is None else override(cluster, builder))
    except BackendError:
        raise  # the builders' own refusals already say which cluster and why
    except Exception as exc:
        # a config the backend refuses, a kubeconfig that won't load, a missing client
        # library: to the broker that cluster does not answer (stale, retried later), and
        # a stored request such as a cancellation still gets its answer
        raise Unavailable(f"cluster {cluster.name}: backend cannot be built: {type(exc).__name__}: {exc}") from exc


def broker_gpu_classes() -> dict[str, tuple[str, ...]]:
    """The GPU classes of the policy in force (the active release, parsed once per version),
    so a class-only spec selects the same models at the destination as in placement."""
    return {name: tuple(c.models) for name, c in current_policy().policy.gpu_classes.items()}


def with_priority_classes(config: dict, key: str, plane: str) -> dict:
    """The cluster's mapping of priorities (``key``: Slurm's ``qos_by_priority``, Kubernetes'
    ``priority_classes``) with the policy's fleet priority classes named at that control
    plane added, so a job submitted at a class runs at the class's QoS or PriorityClass."""
    named = {n: c.on(plane) for n, c in current_policy().policy.priority_classes.items() if c.on(plane)}
    if not named:
        return config
    return {**config, key: {**(config.get(key) or {}), **named}}


def configure_simulated_fleet() -> None:
    """Tell the simulator where a process that was never handed a fleet finds one (a Celery
    worker: GPUBROKER_SIM_AUTOLOAD) and how fast its clock runs; called once at start."""
    source = None
    if settings.GPUBROKER_SIM_AUTOLOAD:
        source = FleetSource(path=str(settings.GPUBROKER_FLEET_FILE), time_scale=settings.GPUBROKER_SIM_TIME_SCALE)
    SimulatorFleet.use_source(source)


def _simulator(cluster) -> Backend:
    return SimulatorBackend(cluster.name)


def _slurm(cluster) -> Backend:
    return slurm_backend_from_config(
        cluster=cluster.name,
        config=with_priority_classes(backend_config(cluster), "qos_by_priority", "slurm_qos"),
        token=resolve_credentials(cluster.credentials_ref),
        timeout_s=settings.GPUBROKER_BACKEND_TIMEOUT_S,
        gpu_classes=broker_gpu_classes(),
    )


def _kube(cluster) -> Backend:
    plane = "volcano" if cluster.kind == "volcano" else "kueue"
    return kube_backend_from_config(
        kind=cluster.kind,
        cluster=cluster.name,
        config=with_priority_classes(backend_config(cluster), "priority_classes", plane),
        token=resolve_credentials(cluster.credentials_ref),
        timeout_s=settings.GPUBROKER_BACKEND_TIMEOUT_S,
        gpu_classes=broker_gpu_classes(),
    )


_BUILDERS = {
    "simulator": _simulator,
    "slurm": _slurm,
    "kueue": _kube,
    "multikueue": _kube,
    "volcano": _kube,
}
