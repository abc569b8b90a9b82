"""Kueue's and Volcano's admission limits as ``LocalLimits``.

Kueue: each ClusterQueue flavor's nominal quota for a GPU resource, plus what it may
borrow from its cohort (its ``borrowingLimit``, at most what the cohort's other queues
lend), the cohort's shared total, and what is reserved of each now
(``status.flavorsReservation``).  Volcano: a Queue's
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


def _gpu_quotas(cq: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(flavor, resource, quota entry) of each GPU resource the ClusterQueue lists."""
    out = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if is_gpu_resource(res.get("name", "")):
                    out.append((flavor.get("name", ""), res["name"], res))
    return out


def _cohort(cq: Mapping[str, Any]) -> str:
    spec = cq.get("spec") or {}
    return str(spec.get("cohort") or spec.get("cohortName") or "")


def _lendable(res: Mapping[str, Any]) -> int:
    nominal = quantity(res.get("nominalQuota") or 0)
    lending = res.get("lendingLimit")
    return nominal if lending is None else min(nominal, quantity(lending))


def kueue_limits(
    cluster_queues: Iterable[Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    namespace: str,
    default_queue: str,
) -> LocalLimits:
    """Per ClusterQueue and GPU flavor: nominal quota plus what it may borrow (its
    ``borrowingLimit``, else what the other ClusterQueues of its cohort lend), and, for a
    cohort of two or more queues, the cohort's total, which its members' use shares.
    A hierarchical Cohort object's own quota is not read: such a cohort reports no
    ceiling rather than a wrong one."""
    cqs = list(cluster_queues)
    scopes = _cq_scopes(local_queues, namespace, default_queue)
    lent: dict[tuple[str, str, str], int] = {}  # (cohort, flavor, resource) -> GPUs lent in all
    members: dict[str, list[str]] = {}
    for cq in cqs:
        if _cohort(cq):
            members.setdefault(_cohort(cq), []).append(_name(cq))
            for flavor, resource, res in _gpu_quotas(cq):
                key = (_cohort(cq), flavor, resource)
                lent[key] = lent.get(key, 0) + _lendable(res)
    quotas: list[GroupQuota] = []
    for cq in cqs:
        quotas += _queue_quotas(cq, scopes.get(_name(cq), []), lent)
    quotas += _cohort_quotas(cqs, scopes, lent, members)
    return LocalLimits(quotas=tuple(quotas))


def _queue_quotas(
    cq: Mapping[str, Any], scopes: list[str], lent: Mapping[tuple[str, str, str], int]
) -> list[GroupQuota]:
    used, cohort = _usage(cq), _cohort(cq)
    preemption = ((cq.get("spec") or {}).get("preemption") or {}).get("withinClusterQueue") or "Never"
    out = []
    for flavor, resource, res in _gpu_quotas(cq):
        nominal = quantity(res.get("nominalQuota") or 0)
        borrow: int = 0
        if cohort:
            others = lent.get((cohort, flavor, resource), 0) - _lendable(res)
            limit = res.get("borrowingLimit")
            borrow = others if limit is None else min(others, quantity(limit))
        out += [
            GroupQuota(
                f"ClusterQueue {_name(cq)} flavor {flavor}",
                pool=flavor,
                scope=scope,
                limit_gpus=nominal + borrow,
                used_gpus=used.get((flavor, resource), 0),
                borrow_gpus=borrow,
                preemption="" if preemption == "Never" else str(preemption),
            )
            for scope in scopes
        ]
    return out


def _cohort_quotas(
    cqs: list[Mapping[str, Any]],
    scopes: Mapping[str, list[str]],
    lent: Mapping[tuple[str, str, str], int],
    members: Mapping[str, list[str]],
) -> list[GroupQuota]:
    """What a cohort's queues admit together cannot pass what they lend together."""
    out = []
    for (cohort, flavor, resource), total in sorted(lent.items()):
        if len(members.get(cohort, [])) < 2:
            continue  # one queue: its own quota says it all
        in_use = sum(_usage(cq).get((flavor, resource), 0) for cq in cqs if _cohort(cq) == cohort)
        out += [
            GroupQuota(f"cohort {cohort} flavor {flavor}", pool=flavor, scope=scope, limit_gpus=total, used_gpus=in_use)
            for name in members[cohort]
            for scope in scopes.get(name, [])
        ]
    return out


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
