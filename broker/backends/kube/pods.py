"""A Kubernetes job's pods: how each worker ended, and its output (the pod log).

Workers are numbered as Kubernetes numbers them: an Indexed Job's completion index
(``batch.kubernetes.io/job-completion-index``), a Volcano task pod's ``volcano.sh/task-index``,
else the number the pod's name ends in.  A worker's end is its container's
``state.terminated`` (or ``lastState.terminated`` after a restart): ``OOMKilled`` says the
kernel killed it for memory; the job's own word (a Job condition's reason such as
``DeadlineExceeded``, a Volcano job's phase) says the rest.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import urllib3
from kubernetes.client.exceptions import ApiException

from broker import preflight
from broker.backends.base import JobOutcome, LogPage, LogsGone, Unavailable, exit_words
from broker.backends.kube.common import KubeClient, condition, translate_api_exception, transport_text

INDEX_KEYS = ("batch.kubernetes.io/job-completion-index", "volcano.sh/task-index")
LOG_BYTES_MAX = 8 * 1024 * 1024  # of one pod's log, read from its start
LINE_MAX = 4000
_TRAILING_NUMBER = re.compile(r"-(\d+)$")


def worker_of(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    for source in (meta.get("labels") or {}, meta.get("annotations") or {}):
        for key in INDEX_KEYS:
            if str(source.get(key, "")).isdigit():
                return str(source[key])
    match = _TRAILING_NUMBER.search(str(meta.get("name", "")))
    return match.group(1) if match else str(meta.get("name", ""))


def _check_failed(pod: Mapping[str, Any]) -> bool:
    """The pod's pre-flight GPU check (``broker.preflight``'s init container) failed."""
    for status in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if status.get("name") != preflight.INIT_CONTAINER:
            continue
        for key in ("state", "lastState"):
            end = (status.get(key) or {}).get("terminated")
            if isinstance(end, Mapping) and end.get("exitCode") == preflight.CHECK_FAILED_EXIT:
                return True
    return False


def _terminated(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The end of the pod's container that says most: a failed one before a clean one."""
    ends = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for key in ("state", "lastState"):
            end = (status.get(key) or {}).get("terminated")
            if isinstance(end, Mapping):
                ends.append(dict(end))
    return max(ends, key=lambda e: (e.get("reason") == "OOMKilled", e.get("exitCode") != 0), default=None)


def end_word(job: Mapping[str, Any]) -> str:
    """The job's own word for its end: a batch Job's condition reason, a vcjob's phase."""
    for ctype in ("Failed", "Complete"):
        cond = condition(job, ctype)
        if cond and cond.get("status") == "True":
            return str(cond.get("reason") or ctype)
    phase = (((job.get("status") or {}).get("state") or {}).get("phase")) or ""
    return str(phase)


def _order(worker: str) -> tuple[int, str]:
    return (int(worker), "") if worker.isdigit() else (1 << 30, worker)


def job_outcome(
    pods: Iterable[Mapping[str, Any]], word: str, deadline_words: Iterable[str] = ("DeadlineExceeded",)
) -> JobOutcome:
    pods = list(pods)
    checked = sorted(
        ((worker_of(p), (p.get("spec") or {}).get("nodeName") or "") for p in pods if _check_failed(p)),
        key=lambda e: _order(e[0]),
    )
    if checked:
        worker, node = checked[0]
        return JobOutcome(
            summary=preflight.summary(worker, node),
            end_reason=preflight.END_REASON,
            exit_code=preflight.CHECK_FAILED_EXIT,
            worker=worker,
            detail=word,
        )
    ends = sorted(
        (
            (worker_of(p), (p.get("spec") or {}).get("nodeName") or "", t)
            for p in pods
            if (t := _terminated(p)) is not None
        ),
        key=lambda e: _order(e[0]),
    )
    for worker, node, end in ends:
        if end.get("reason") == "OOMKilled":
            where = f"worker {worker}" + (f" (node {node})" if node else "")
            return JobOutcome(
                summary=f"ran out of memory on {where}",
                end_reason="OOMKilled",
                exit_code=end.get("exitCode"),
                worker=worker,
                detail=str(end.get("message") or ""),
            )
    if word in deadline_words:
        return JobOutcome(summary=f"stopped at its time limit ({word})", end_reason=word)
    failed = [(w, e) for w, _, e in ends if e.get("exitCode") not in (0, None)]
    if failed:
        worker, end = failed[0]
        words = exit_words(end.get("exitCode"), end.get("signal"))
        return JobOutcome(
            summary=f"worker {worker} {words}" if len(ends) > 1 else words,
            end_reason=str(end.get("reason") or word),
            exit_code=end.get("exitCode"),
            signal=end.get("signal"),
            worker=worker,
            detail=word,
        )
    if ends:
        return JobOutcome(summary=exit_words(0), end_reason=word or "Completed", exit_code=0)
    return JobOutcome(
        summary={"Completed": "completed", "Complete": "completed"}.get(word, f"ended ({word})") if word else "ended",
        end_reason=word,
    )


def read_log(
    kube: KubeClient,
    namespace: str,
    pods: list[dict[str, Any]],
    *,
    worker: str,
    offset: int | None,
    limit: int,
    tail: int | None,
) -> LogPage:
    """One worker's pod log (worker 0, or the first, when none is named)."""
    by_worker = {worker_of(p): p for p in pods}
    workers = tuple(sorted(by_worker, key=_order))
    if not workers:
        raise LogsGone("the job's pods are gone")
    chosen = worker or workers[0]
    if chosen not in by_worker:
        raise LogsGone(f"the pod of worker {chosen} is gone")
    name = (by_worker[chosen].get("metadata") or {}).get("name", "")
    lines = [line[:LINE_MAX] for line in _log_text(kube, namespace, name).splitlines()]
    if tail is not None:
        start = max(0, len(lines) - tail)
        return LogPage(lines=tuple(lines[start:]), offset=start, workers=workers, worker=chosen)
    start = offset or 0
    return LogPage(
        lines=tuple(lines[start : start + limit]),
        offset=start,
        more=len(lines) > start + limit,
        workers=workers,
        worker=chosen,
    )


def _log_text(kube: KubeClient, namespace: str, name: str) -> str:
    try:
        # unpreloaded, the client hands back the HTTP response (its stubs say str)
        resp: Any = kube.core().read_namespaced_pod_log(
            name, namespace, limit_bytes=LOG_BYTES_MAX, _preload_content=False, _request_timeout=kube.timeout
        )
    except ApiException as exc:
        if exc.status == 404:
            raise LogsGone(f"pod {namespace}/{name} is gone") from exc
        raise translate_api_exception(exc, kube.where) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unavailable(transport_text(exc, kube.where)) from exc
    return (resp.data or b"").decode("utf-8", errors="replace")
