"""A tiny model of Kueue's job controller and scheduler, driven step by step by tests.

``reconcile()`` does what Kueue does between two looks at the cluster: a
Workload for every suspended, queue-labelled Job; then, oldest first, each
pending Workload is admitted if its ClusterQueue has unused nominal quota for
its GPU resource in a matching flavor, or gets ``QuotaReserved=False`` with
reason ``Pending`` and Kueue's own message wording (FACTS.md):
``couldn't assign flavors to pod set main: insufficient unused quota for
nvidia.com/gpu in flavor a100, 4 more needed`` or ``... > maximum capacity (8)``.
Only GPU resources are quota-checked.  Admission unsuspends the Job, adds the
flavor's node labels, and binds pods to nodes.  ``finish``, ``evict`` and
(MultiKueue) ``dispatch`` are the other hooks.
"""
from __future__ import annotations

import hashlib
from datetime import datetime
from typing import TYPE_CHECKING, Any

from broker.backends.kube.common import is_gpu_resource, quantity, rfc3339
from tests.broker.backends.kube.emu.emulator_pods import (
    delete_pods, finish_pods, make_pod, place, pod_requests)
from tests.broker.backends.kube.emu.emulator_store import owner_ref

if TYPE_CHECKING:
    from tests.broker.backends.kube.emu.emulator import KubeEmulator

G = "kueue.x-k8s.io"
JOBS, WORKLOADS = ("batch", "jobs"), (G, "workloads")
LQS, CQS, FLAVORS = (G, "localqueues"), (G, "clusterqueues"), (G, "resourceflavors")
MK_CONFIGS = (G, "multikueueconfigs")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _allowed_values(pod_spec: dict[str, Any]) -> dict[str, set[str]]:
    """Label key -> values the pod accepts (nodeSelector and required "In" affinity)."""
    allowed = {k: {v} for k, v in (pod_spec.get("nodeSelector") or {}).items()}
    terms = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms") or []
    for term in terms[:1]:  # one term is what the backends write
        for expr in term.get("matchExpressions") or []:
            if expr.get("operator") == "In":
                allowed[expr["key"]] = set(expr.get("values") or [])
    return allowed


class KueueModel:
    def __init__(self, emu: "KubeEmulator"):
        self.emu = emu
        self.store = emu.store

    # ---- helpers --------------------------------------------------------------------
    def _cond(self, obj: dict[str, Any], ctype: str, status: bool, reason: str,
              message: str) -> None:
        conds = obj.setdefault("status", {}).setdefault("conditions", [])
        now = rfc3339(self.emu.now())
        for cond in conds:
            if cond["type"] == ctype:
                changed = cond["status"] != ("True" if status else "False")
                cond.update(status="True" if status else "False", reason=reason,
                            message=message)
                if changed:
                    cond["lastTransitionTime"] = now
                return
        conds.append({"type": ctype, "status": "True" if status else "False", "reason": reason,
                      "message": message, "lastTransitionTime": now})

    @staticmethod
    def _true(obj: dict[str, Any], ctype: str) -> bool:
        return any(c["type"] == ctype and c["status"] == "True"
                   for c in (obj.get("status") or {}).get("conditions") or [])

    def job(self, ref: str) -> dict[str, Any]:
        ns, _, name = ref.rpartition("/")
        return self.store.get(JOBS, ns, name)

    def workload(self, ref: str) -> dict[str, Any]:
        job = self.job(ref)
        for _, obj in self.store.dependents(job["metadata"]["uid"]):
            if obj.get("kind") == "Workload":
                return obj
        raise KeyError(f"no Workload for {ref}; call reconcile() first")

    def _job_of(self, wl: dict[str, Any]) -> dict[str, Any] | None:
        uid = wl["metadata"]["ownerReferences"][0]["uid"]
        return next((j for j in self.store.list(JOBS) if j["metadata"]["uid"] == uid), None)

    # ---- reconcile ------------------------------------------------------------------
    def reconcile(self) -> None:
        with self.store.lock:
            for job in self.store.list(JOBS):
                self._ensure_workload(job)
            for wl in self.store.list(WORKLOADS):
                if not (self._true(wl, "QuotaReserved") or self._true(wl, "Finished")) \
                        and (wl.get("spec") or {}).get("active", True):
                    self._try_admit(wl)
            self._update_queues()

    def _ensure_workload(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
        if not queue or meta.get("deletionTimestamp") or self.store.dependents(meta["uid"]):
            return
        tpl = job["spec"]["template"]
        name = f"job-{meta['name']}-{hashlib.sha256(meta['uid'].encode()).hexdigest()[:5]}"
        wl: dict[str, Any] = {
            "apiVersion": f"{G}/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                         "ownerReferences": [owner_ref(job, "batch/v1", "Job")]},
            "spec": {"queueName": queue, "active": True, "podSets": [{
                "name": "main", "count": int(job["spec"].get("parallelism") or 1),
                "template": {"metadata": tpl.get("metadata") or {}, "spec": tpl["spec"]}}]},
        }
        priority = (meta.get("labels") or {}).get("kueue.x-k8s.io/priority-class")
        if priority:
            wl["spec"]["priorityClassRef"] = {"group": G, "kind": "WorkloadPriorityClass",
                                              "name": priority}
        self.emu.create(WORKLOADS, meta["namespace"], wl)

    def _cluster_queue(self, wl: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        ns, queue = wl["metadata"]["namespace"], wl["spec"]["queueName"]
        lq = self.store.find(LQS, ns, queue)
        if lq is None:
            return None, f"LocalQueue {queue} doesn't exist"
        if (lq.get("spec") or {}).get("stopPolicy", "None") != "None":
            return None, f"LocalQueue {queue} is stopped"
        cq_name = lq["spec"]["clusterQueue"]
        cq = self.store.find(CQS, "", cq_name)
        if cq is None:
            return None, f"ClusterQueue {cq_name} not found"
        if (cq.get("spec") or {}).get("stopPolicy", "None") != "None":
            return None, f"ClusterQueue {cq_name} is inactive"
        return cq, ""

    def _try_admit(self, wl: dict[str, Any]) -> None:
        cq, problem = self._cluster_queue(wl)
        if cq is None:
            self._cond(wl, "QuotaReserved", False, "Inadmissible", problem)
        else:
            flavors, problem = self._assign(cq, wl)
            if flavors is None:
                self._cond(wl, "QuotaReserved", False, "Pending",
                           f"couldn't assign flavors to pod set main: {problem}")
            else:
                self._reserve(cq, wl, flavors)
        self.store.bump(wl)

    def _usage(self, cq_name: str) -> dict[tuple[str, str], int]:
        used: dict[tuple[str, str], int] = {}
        for wl in self.store.list(WORKLOADS):
            adm = (wl.get("status") or {}).get("admission") or {}
            if adm.get("clusterQueue") != cq_name or self._true(wl, "Finished"):
                continue
            for psa in adm.get("podSetAssignments") or []:
                for res, flavor in (psa.get("flavors") or {}).items():
                    used[(flavor, res)] = used.get((flavor, res), 0) + quantity(
                        (psa.get("resourceUsage") or {}).get(res))
        return used

    def _assign(self, cq: dict[str, Any], wl: dict[str, Any]
                ) -> tuple[dict[str, str] | None, str]:
        ps = wl["spec"]["podSets"][0]
        per_pod = pod_requests(ps["template"]["spec"])
        used = self._usage(cq["metadata"]["name"])
        chosen: dict[str, str] = {}
        for res, n in per_pod.items():
            flavor, problem = self._pick_flavor(cq, ps, res, n * int(ps["count"]), used)
            if flavor is None:
                return None, problem
            chosen[res] = flavor
        return chosen, ""

    def _pick_flavor(self, cq: dict[str, Any], ps: dict[str, Any], res: str, total: int,
                     used: dict[tuple[str, str], int]) -> tuple[str | None, str]:
        allowed = _allowed_values(ps["template"]["spec"])
        problems = []
        for group in cq["spec"].get("resourceGroups") or []:
            if res not in group.get("coveredResources", []):
                continue
            for fq in group.get("flavors") or []:
                flavor = self.store.find(FLAVORS, "", fq["name"]) or {}
                labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
                if any(k in labels and labels[k] not in v for k, v in allowed.items()):
                    problems.append(f"flavor {fq['name']} doesn't match node affinity")
                    continue
                quota = next((quantity(r["nominalQuota"]) for r in fq["resources"]
                              if r["name"] == res), 0)
                free = quota - used.get((fq["name"], res), 0)
                if total > quota:
                    problems.append(
                        f"insufficient quota for {res} in flavor {fq['name']}, previously "
                        f"considered podsets requests (0) + current podset request ({total}) "
                        f"> maximum capacity ({quota})")
                elif total > free:
                    problems.append(f"insufficient unused quota for {res} in flavor "
                                    f"{fq['name']}, {total - free} more needed")
                else:
                    return fq["name"], ""
        return None, ", ".join(problems) or f"resource {res} unavailable in ClusterQueue"

    def _reserve(self, cq: dict[str, Any], wl: dict[str, Any], flavors: dict[str, str]) -> None:
        ps = wl["spec"]["podSets"][0]
        per_pod = pod_requests(ps["template"]["spec"])
        wl["status"]["admission"] = {"clusterQueue": cq["metadata"]["name"], "podSetAssignments": [{
            "name": "main", "count": ps["count"], "flavors": flavors,
            "resourceUsage": {r: str(n * ps["count"]) for r, n in per_pod.items()}}]}
        self._cond(wl, "QuotaReserved", True, "QuotaReserved",
                   f"Quota reserved in ClusterQueue {cq['metadata']['name']}")
        checks = [c["name"] for c in ((cq["spec"].get("admissionChecksStrategy") or {})
                                      .get("admissionChecks") or [])]
        if checks:
            self._start_checks(wl, checks)
        else:
            self._admit(wl)

    def _start_checks(self, wl: dict[str, Any], checks: list[str]) -> None:
        now = rfc3339(self.emu.now())
        wl["status"]["admissionChecks"] = [{"name": c, "state": "Pending", "message": "",
                                            "lastTransitionTime": now} for c in checks]
        clusters: list[str] = []
        for cfg in self.store.list(MK_CONFIGS):
            clusters += [c for c in cfg["spec"]["clusters"] if c not in clusters]
        if clusters:
            wl["status"]["nominatedClusterNames"] = clusters
        self._cond(wl, "Admitted", False, "UnsatisfiedAdmissionChecks",
                   "The workload has not all admission checks")

    def _admit(self, wl: dict[str, Any], bind: bool = True) -> None:
        self._cond(wl, "Admitted", True, "Admitted", "The workload is admitted")
        job = self._job_of(wl)
        if job is None:
            return
        job["spec"]["suspend"] = False
        flavor_labels = self._flavor_labels(wl)
        tpl_spec = job["spec"]["template"]["spec"]
        tpl_spec["nodeSelector"] = {**(tpl_spec.get("nodeSelector") or {}), **flavor_labels}
        job.setdefault("status", {}).update(startTime=rfc3339(self.emu.now()),
                                            active=int(job["spec"].get("parallelism") or 1))
        if bind:
            self._bind(job, wl)
        self.store.bump(job)

    def _flavor_labels(self, wl: dict[str, Any]) -> dict[str, str]:
        labels: dict[str, str] = {}
        for psa in wl["status"]["admission"]["podSetAssignments"]:
            for flavor in (psa.get("flavors") or {}).values():
                found = self.store.find(FLAVORS, "", flavor) or {}
                labels.update((found.get("spec") or {}).get("nodeLabels") or {})
        return labels

    def _bind(self, job: dict[str, Any], wl: dict[str, Any]) -> None:
        tpl = job["spec"]["template"]
        count = int(job["spec"].get("parallelism") or 1)
        nodes = place(self.store, tpl["spec"], count)
        owner = owner_ref(job, "batch/v1", "Job")
        name = job["metadata"]["name"]
        for i, node in enumerate(nodes):
            make_pod(self.store, f"{name}-{i}", job["metadata"]["namespace"], tpl, node,
                     {"batch.kubernetes.io/job-name": name, "job-name": name,
                      "batch.kubernetes.io/job-completion-index": str(i)}, owner)
        if all(nodes):
            self._cond(wl, "PodsReady", True, "PodsReady", "All pods reached readiness")

    def _update_queues(self) -> None:
        for cq in self.store.list(CQS):
            name = cq["metadata"]["name"]
            pending = reserving = admitted = 0
            for wl in self.store.list(WORKLOADS):
                lq = self.store.find(LQS, wl["metadata"]["namespace"], wl["spec"]["queueName"])
                if not lq or lq["spec"].get("clusterQueue") != name or self._true(wl, "Finished"):
                    continue
                reserving += self._true(wl, "QuotaReserved")
                admitted += self._true(wl, "Admitted")
                pending += not self._true(wl, "QuotaReserved")
            usage = self._usage(name)
            cq["status"] = {**(cq.get("status") or {}), "pendingWorkloads": pending,
                            "reservingWorkloads": reserving, "admittedWorkloads": admitted,
                            "flavorsUsage": [{"name": f, "resources": [
                                {"name": r, "total": str(n), "borrowed": "0"}]}
                                for (f, r), n in sorted(usage.items())]}
            self.store.bump(cq)

    # ---- hooks ----------------------------------------------------------------------
    def finish(self, ref: str, succeeded: bool = True) -> None:
        """The Job ran to completion (or failed): Job condition + Workload Finished."""
        with self.store.lock:
            job, wl = self.job(ref), self.workload(ref)
            now = rfc3339(self.emu.now())
            ctype = "Complete" if succeeded else "Failed"
            job["status"].update(active=0, completionTime=now,
                                 **({"succeeded": job["spec"].get("completions", 1)}
                                    if succeeded else {"failed": 1}))
            job["status"].setdefault("conditions", []).append(
                {"type": ctype, "status": "True", "lastTransitionTime": now,
                 "reason": "Completed" if succeeded else "BackoffLimitExceeded",
                 "message": "" if succeeded else "Job has reached the specified backoff limit"})
            self._cond(wl, "Finished", True, "Succeeded" if succeeded else "Failed",
                       "Job finished successfully" if succeeded
                       else "Job has reached the specified backoff limit")
            finish_pods(self.store, job["metadata"]["uid"],
                        "Succeeded" if succeeded else "Failed")
            self.store.bump(job)
            self.store.bump(wl)
            self._update_queues()

    def evict(self, ref: str, reason: str = "Preempted",
              message: str = "Preempted to accommodate a workload (UID: x) due to "
                             "prioritization in the ClusterQueue") -> None:
        """Take the quota back: the Job is suspended again and its pods go."""
        with self.store.lock:
            job, wl = self.job(ref), self.workload(ref)
            admitted = next((c for c in wl["status"].get("conditions") or []
                             if c["type"] == "Admitted" and c["status"] == "True"), None)
            if admitted:  # as Kueue keeps the time admitted before each eviction
                since = datetime.fromisoformat(admitted["lastTransitionTime"].replace("Z", "+00:00"))
                ran = int((self.emu.now() - since).total_seconds())
                wl["status"]["accumulatedPastExecutionTimeSeconds"] = (
                    wl["status"].get("accumulatedPastExecutionTimeSeconds", 0) + ran)
            self._cond(wl, "Evicted", True, reason, message)
            if reason == "Preempted":
                self._cond(wl, "Preempted", True, "InClusterQueue", message)
            self._cond(wl, "QuotaReserved", False, "Pending", message)
            self._cond(wl, "Admitted", False, "NoReservation", "The workload has no reservation")
            wl["status"].pop("admission", None)
            job["spec"]["suspend"] = True
            job["status"]["active"] = 0
            delete_pods(self.store, job["metadata"]["uid"])
            self.store.bump(wl)
            self.store.bump(job)
            self._update_queues()

    def dispatch(self, ref: str, cluster: str) -> None:
        """MultiKueue: worker ``cluster`` admitted the copy; the manager records it."""
        with self.store.lock:
            wl = self.workload(ref)
            for check in wl["status"].get("admissionChecks") or []:
                check.update(state="Ready", lastTransitionTime=rfc3339(self.emu.now()),
                             message=f'The workload was admitted on "{cluster}"')
            wl["status"].pop("nominatedClusterNames", None)  # exclusive with clusterName
            wl["status"]["clusterName"] = cluster
            self._admit(wl, bind=False)  # pods run on the worker, not here
            # as real MultiKueue does (data/real/multikueue-manager-*.json): the worker's pods
            # count as the manager's, and the manager's Job status copies the worker's
            self._cond(wl, "PodsReady", True, "Started", "All pods reached readiness")
            self.store.bump(wl)
            self._update_queues()

    def deactivate(self, ref: str) -> None:
        with self.store.lock:
            wl = self.workload(ref)
            wl["spec"]["active"] = False
            self._cond(wl, "Evicted", True, "Deactivated", "The workload is deactivated")
            self.store.bump(wl)

    def used_gpus(self, cq_name: str) -> int:
        return sum(n for (_, r), n in self._usage(cq_name).items() if is_gpu_resource(r))
