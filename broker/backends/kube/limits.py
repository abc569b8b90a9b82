"""Kueue's and Volcano's admission limits as ``LocalLimits``.

Kueue: each ClusterQueue flavor's nominal quota for a GPU resource, plus its
``borrowingLimit`` when the queue is in a cohort (with a cohort and no borrowing limit the
ceiling is the cohort's spare quota, unknown here: no GPU ceiling is reported), and what
is reserved of it now (``status.flavorsReservation``).  Volcano: a Queue's
``spec.capability`` against ``status.allocated``.  A limit applies to every job when the
broker's default queue feeds it, else only to jobs of a queue that does (scope = the
LocalQueue / Queue name).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from broker.backends.kube.common import is_gpu_resource, quantity
from broker.local_limits import GroupQuota, LocalLimits


def _name(obj: Mapping[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def _usage(cq: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for flavor in (cq.get("status") or {}).get("flavorsReservation") or []:
        for res in flavor.get("resources") or []:
            out[(flavor.get("name", ""), res.get("name", ""))] = quantity(res.get("total") or 0)
    return out


def _cq_scopes(local_queues: Iterable[Mapping[str, Any]], namespace: str, default_queue: str) -> dict[str, list[str]]:
    """ClusterQueue -> the scopes whose jobs reach it: '' for the broker's default queue."""
    out: dict[str, list[str]] = {}
    for lq in local_queues:
        meta, cq = lq.get("metadata") or {}, (lq.get("spec") or {}).get("clusterQueue", "")
        default = meta.get("name") == default_queue and meta.get("namespace") == namespace
        scope = "" if default else meta.get("name", "")
        out.setdefault(cq, [])
        if scope not in out[cq]:
            out[cq].append(scope)
    return out


def kueue_limits(
    cluster_queues: Iterable[Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    namespace: str,
    default_queue: str,
) -> LocalLimits:
    scopes = _cq_scopes(local_queues, namespace, default_queue)
    quotas: list[GroupQuota] = []
    for cq in cluster_queues:
        spec, used = cq.get("spec") or {}, _usage(cq)
        in_cohort = bool(spec.get("cohort") or spec.get("cohortName"))
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    if not is_gpu_resource(res.get("name", "")):
                        continue
                    nominal = quantity(res.get("nominalQuota") or 0)
                    borrow = res.get("borrowingLimit")
                    limit = None if in_cohort and borrow is None else nominal + quantity(borrow or 0)
                    source = f"ClusterQueue {_name(cq)} flavor {flavor.get('name', '')}"
                    quotas += [
                        GroupQuota(
                            source,
                            pool=flavor.get("name", ""),
                            scope=scope,
                            limit_gpus=limit,
                            used_gpus=used.get((flavor.get("name", ""), res["name"]), 0),
                            borrow_gpus=quantity(borrow or 0) if limit is not None else 0,
                        )
                        for scope in scopes.get(_name(cq), [])
                    ]
    return LocalLimits(quotas=tuple(quotas))


def volcano_limits(queues: Iterable[Mapping[str, Any]], default_queue: str) -> LocalLimits:
    quotas: list[GroupQuota] = []
    for queue in queues:
        capability = (queue.get("spec") or {}).get("capability") or {}
        allocated = (queue.get("status") or {}).get("allocated") or {}
        for res, value in capability.items():
            if is_gpu_resource(res):
                name = _name(queue)
                quotas.append(
                    GroupQuota(
                        f"Volcano queue {name} (capability {res}={value})",
                        scope="" if name == default_queue else name,
                        limit_gpus=quantity(value),
                        used_gpus=quantity(allocated.get(res) or 0),
                    )
                )
    return LocalLimits(quotas=tuple(quotas))
