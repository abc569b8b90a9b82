"""A tiny model of Volcano's job controller, admission webhook and gang scheduler.

``reconcile()``: every vcjob gets its PodGroup ``<job>-<uid>`` (minMember =
minAvailable, minResources = the gang's GPUs); then each waiting PodGroup of
an Open queue is tried as a whole.  If at least minAvailable task pods fit on
the nodes' free GPUs they are all bound (PodGroup Running, Job Running);
otherwise none is, and the PodGroup gets ``Unschedulable`` /
``NotEnoughResources`` with Volcano's message: ``4/4 tasks in gang
unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; Pending: 1
Unschedulable, 3 Schedulable``.  A Closed queue leaves the gang Pending.  A gang whose
GPUs would take its queue past ``spec.capability`` stays Pending with no condition and an
event ``queue resource quota insufficient: insufficient nvidia.com/gpu``, as real Volcano
v1.14.1 does (captured: tests/broker/backends/kube/data/real/volcano-*-capability-*).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.backends.kube.common import GPU_RESOURCE, rfc3339
from tests.broker.backends.kube.emu.emulator_pods import delete_pods, finish_pods, make_pod, place, pod_requests
from tests.broker.backends.kube.emu.emulator_store import ApiError, owner_ref

if TYPE_CHECKING:
    from tests.broker.backends.kube.emu.emulator import KubeEmulator

VCJOBS = ("batch.volcano.sh", "jobs")
PODGROUPS = ("scheduling.volcano.sh", "podgroups")
QUEUES = ("scheduling.volcano.sh", "queues")


class VolcanoModel:
    def __init__(self, emu: "KubeEmulator"):
        self.emu = emu
        self.store = emu.store

    def admit_webhook(self, job: dict[str, Any]) -> None:
        """Volcano's validating webhook: queue must exist and be Open; gang must fit tasks."""
        spec = job.get("spec") or {}
        queue = spec.get("queue") or "default"
        found = self.store.find(QUEUES, "", queue)
        denied = 'admission webhook "validatejob.volcano.sh" denied the request: '
        if found is None:
            raise ApiError(400, "BadRequest", denied + f"unable to find job queue: "
                           f'queue.scheduling.volcano.sh "{queue}" not found;')
        state = (found.get("status") or {}).get("state") or "Open"
        if state != "Open":
            raise ApiError(400, "BadRequest", denied + "can only submit job to queue with "
                           f"state `Open`, queue `{queue}` status is `{state}`")
        replicas = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [])
        if int(spec.get("minAvailable") or 0) > replicas:
            raise ApiError(400, "BadRequest", denied + "job 'minAvailable' should not be "
                           "greater than total replicas in tasks;")

    def job(self, ref: str) -> dict[str, Any]:
        ns, _, name = ref.rpartition("/")
        return self.store.get(VCJOBS, ns, name)

    def pod_group(self, ref: str) -> dict[str, Any]:
        job = self.job(ref)
        meta = job["metadata"]
        return self.store.get(PODGROUPS, meta["namespace"], f"{meta['name']}-{meta['uid']}")

    def _phase(self, job: dict[str, Any], phase: str, message: str = "") -> None:
        now = rfc3339(self.emu.now())
        status = job.setdefault("status", {})
        status["state"] = {"phase": phase, "lastTransitionTime": now, "message": message,
                           "reason": ""}
        status.setdefault("conditions", []).append({"status": phase, "lastTransitionTime": now})
        self.store.bump(job)

    def reconcile(self) -> None:
        with self.store.lock:
            for job in self.store.list(VCJOBS):
                if not job["metadata"].get("deletionTimestamp"):
                    self._ensure_pod_group(job)
            for pg in self.store.list(PODGROUPS):
                if (pg.get("status") or {}).get("phase") in ("Pending", "Inqueue"):
                    self._schedule(pg)

    def _ensure_pod_group(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        name = f"{meta['name']}-{meta['uid']}"
        if self.store.find(PODGROUPS, meta["namespace"], name):
            return
        gpus = sum(int(t.get("replicas") or 0) * n
                   for t in job["spec"].get("tasks") or []
                   for n in pod_requests(t["template"]["spec"]).values())
        pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
              "metadata": {"name": name, "ownerReferences": [
                  owner_ref(job, "batch.volcano.sh/v1alpha1", "Job")]},
              "spec": {"minMember": int(job["spec"].get("minAvailable") or 1),
                       "queue": job["spec"].get("queue") or "default",
                       # as real Volcano: each resource with and without "requests."
                       "minResources": {GPU_RESOURCE: str(gpus),
                                        f"requests.{GPU_RESOURCE}": str(gpus)}},
              "status": {"phase": "Pending"}}
        self.emu.create(PODGROUPS, meta["namespace"], pg)
        self._phase(job, "Pending")

    def _owner(self, pg: dict[str, Any]) -> dict[str, Any] | None:
        uid = pg["metadata"]["ownerReferences"][0]["uid"]
        return next((j for j in self.store.list(VCJOBS) if j["metadata"]["uid"] == uid), None)

    def _schedule(self, pg: dict[str, Any]) -> None:
        job = self._owner(pg)
        queue = self.store.find(QUEUES, "", pg["spec"]["queue"]) or {}
        if job is None or (queue.get("status") or {}).get("state", "Open") != "Open":
            return  # a closed queue enqueues nothing
        if pg["status"].get("phase") == "Pending" and self._over_capability(pg, queue):
            self._event(pg, "queue resource quota insufficient: insufficient " + GPU_RESOURCE)
            return
        tasks = [(t, place(self.store, t["template"]["spec"], int(t.get("replicas") or 0)))
                 for t in job["spec"].get("tasks") or []]
        total = sum(len(nodes) for _, nodes in tasks)
        fit = sum(1 for _, nodes in tasks for n in nodes if n)
        if fit >= int(pg["spec"]["minMember"]):
            self._bind(job, pg, tasks)
            return
        unfit = total - fit
        detail = f"Pending: {unfit} Unschedulable" + (f", {fit} Schedulable" if fit else "")
        message = (f"{total}/{total} tasks in gang unschedulable: pod group is not ready, "
                   f"{total} Pending, {pg['spec']['minMember']} minAvailable; {detail}")
        pg["status"] = {"phase": "Inqueue", "conditions": [{
            "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
            "message": message, "lastTransitionTime": rfc3339(self.emu.now()),
            "transitionID": pg["metadata"]["uid"]}]}
        self.store.bump(pg)

    def _over_capability(self, pg: dict[str, Any], queue: dict[str, Any]) -> bool:
        cap = ((queue.get("spec") or {}).get("capability") or {}).get(GPU_RESOURCE)
        if cap is None:
            return False
        used = sum(int((p.get("spec") or {}).get("minResources", {}).get(GPU_RESOURCE, 0))
                   for p in self.store.list(PODGROUPS)
                   if p["spec"].get("queue") == pg["spec"]["queue"]
                   and (p.get("status") or {}).get("phase") == "Running")
        return used + int(pg["spec"]["minResources"].get(GPU_RESOURCE, 0)) > int(cap)

    def _event(self, obj: dict[str, Any], message: str) -> None:
        meta = obj["metadata"]
        if any(e["message"] == message and e["involvedObject"]["uid"] == meta["uid"]
               for e in self.store.list(("", "events"), meta["namespace"])):
            return
        self.store.create(("", "events"), meta["namespace"], {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{len(self.store.list(('', 'events')))}"},
            "involvedObject": {"kind": "PodGroup", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"]},
            "type": "Normal", "reason": "Unschedulable", "message": message,
            "lastTimestamp": rfc3339(self.emu.now()), "source": {"component": "volcano"}})

    def _bind(self, job: dict[str, Any], pg: dict[str, Any],
              tasks: list[tuple[dict[str, Any], list[str | None]]]) -> None:
        owner = owner_ref(job, "batch.volcano.sh/v1alpha1", "Job")
        name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
        running = 0
        for task, nodes in tasks:
            for i, node in enumerate(nodes):
                make_pod(self.store, f"{name}-{task['name']}-{i}", ns, task["template"], node,
                         {"volcano.sh/job-name": name, "volcano.sh/task-spec": task["name"]},
                         owner)
                running += node is not None
        pg["status"] = {"phase": "Running", "running": running, "conditions": [{
            "type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be "
            "scheduled", "lastTransitionTime": rfc3339(self.emu.now())}]}
        self.store.bump(pg)
        job["status"].update(running=running, minAvailable=pg["spec"]["minMember"])
        self._phase(job, "Running")

    # ---- hooks ----------------------------------------------------------------------
    def finish(self, ref: str, succeeded: bool = True) -> None:
        with self.store.lock:
            job = self.job(ref)
            phase = "Completed" if succeeded else "Failed"
            finish_pods(self.store, job["metadata"]["uid"], "Succeeded" if succeeded else "Failed")
            job["status"].update(running=0, **({"succeeded": job["status"].get("running", 0)}
                                               if succeeded else {"failed": 1}))
            self._phase(job, phase)
            pg = self.pod_group(ref)
            pg["status"]["phase"] = "Completed"
            self.store.bump(pg)

    def evict(self, ref: str, reason: str = "preempt", then: str = "Restarting") -> None:
        """Volcano's scheduler evicting the job's first pod (its preempt or reclaim action:
        an Evict event on the pod, the pod deleted), and the job controller's answer: under
        our PodEvicted policy (RestartJob) every pod goes and the job waits again (Restarting,
        then Pending: its PodGroup too, for the next reconcile to place); ``then="Terminated"``
        as under the TerminateJob of earlier releases."""
        with self.store.lock:
            job = self.job(ref)
            ns, uid = job["metadata"]["namespace"], job["metadata"]["uid"]
            victim = min((o["metadata"] for _, o in self.store.dependents(uid) if o.get("kind") == "Pod"),
                         key=lambda m: m["name"])
            self.store.create(("", "events"), ns, {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{victim['name']}.evict"},
                "involvedObject": {"kind": "Pod", "name": victim["name"], "namespace": ns, "uid": victim["uid"]},
                "type": "Warning", "reason": "Evict", "message": f"Pod is evicted, because of {reason}",
                "lastTimestamp": rfc3339(self.emu.now()), "source": {"component": "volcano"}})
            delete_pods(self.store, uid)
            job["status"].update(running=0)
            self._phase(job, then)
            if then == "Restarting":
                job["status"]["retryCount"] = job["status"].get("retryCount", 0) + 1
                self._phase(job, "Pending")
                pg = self.pod_group(ref)
                pg["status"] = {"phase": "Pending"}
                self.store.bump(pg)

    def set_queue_state(self, name: str, state: str) -> None:
        with self.store.lock:
            queue = self.store.get(QUEUES, "", name)
            queue.setdefault("status", {})["state"] = state
            self.store.bump(queue)
