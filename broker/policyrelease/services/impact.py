"""Request and run an impact replay of a proposed policy version.

The replay itself runs in a child process (``manage.py policy_impact_run``) against a
throwaway database; this side gathers the inputs from the real database, relays the
child's progress onto the ImpactReplay row and stores the table it prints.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from django.contrib.auth.models import User
from django.conf import settings
from django.db import transaction

from broker.policyrelease.history import current_fleet, fleet_to_json, jobs_to_json, recent_jobs
from broker.policyrelease.models import ImpactReplay, ImpactState, PolicyRelease, ReleaseState
from broker.policyrelease.services.releases import ReleaseRefused
from broker.services.records import moves, tasks_bridge
from broker.services.records.audit import audit
from broker import runtime

log = logging.getLogger(__name__)
IMPACT_TIMEOUT_S = 900
_MANAGE = Path(settings.BASE_DIR) / "manage.py"


@transaction.atomic
def impact_request(*, actor: User, release_id: int) -> ImpactReplay:
    release = PolicyRelease.objects.get(id=release_id)
    baseline = PolicyRelease.objects.filter(state=ReleaseState.ACTIVE).first()
    if baseline is None:
        raise ReleaseRefused("state", "no version is in force to compare with")
    impact = ImpactReplay.objects.create(release=release, baseline=baseline, requested_by=actor, message="queued")
    audit(
        action="policy.impact_requested",
        actor=actor,
        policy_version=release.version,
        message=f"v{release.number} against v{baseline.number}",
    )
    tasks_bridge.enqueue_impact(impact.id)
    return impact


def _update(impact: ImpactReplay, **fields) -> None:
    ImpactReplay.objects.filter(id=impact.id).update(**fields)


def impact_run(*, impact_id: int) -> ImpactReplay:
    impact = ImpactReplay.objects.select_related("release", "baseline").get(id=impact_id)
    if impact.state in (ImpactState.DONE, ImpactState.FAILED):
        return impact  # a redelivered task: the result is stored
    now = runtime.now()
    moves.impact_started(pk=impact.id, fields={"progress": 0, "message": "reading the last 30 days"})
    assert impact.baseline is not None  # impact_request sets the active version
    payload = {
        "jobs": jobs_to_json(recent_jobs(now=now)),
        "fleet": fleet_to_json(current_fleet()),
        "policies": {"active": impact.baseline.content, "proposed": impact.release.content},
    }
    try:
        result = _run_child(impact, payload)
    except Exception as exc:  # recorded on the row the page shows; the task does not retry
        log.exception("impact replay %s failed", impact_id)
        moves.impact_finished(ok=False, pk=impact.id, fields={"message": str(exc)[:500], "finished_at": runtime.now()})
    else:
        moves.impact_finished(
            ok=True,
            pk=impact.id,
            fields={
                "progress": 100,
                "result": result,
                "message": f"{len(payload['jobs'])} workloads replayed on {len(payload['fleet'])} clusters",
                "finished_at": runtime.now(),
            },
        )
    impact.refresh_from_db()
    audit(action="policy.impact_" + impact.state, policy_version=impact.release.version, message=impact.message)
    return impact


def _run_child(impact: ImpactReplay, payload: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpubroker-impact-") as folder:
        path = Path(folder) / "input.json"
        path.write_text(json.dumps(payload), encoding="utf-8")
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{Path(folder) / 'replay.sqlite3'}",
            "CELERY_BROKER_URL": "",
            "GPUBROKER_LOG_LEVEL": "WARNING",
        }
        proc = subprocess.Popen(
            [sys.executable, str(_MANAGE), "policy_impact_run", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(settings.BASE_DIR),
        )
        timer = threading.Timer(IMPACT_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            result = _relay(impact, proc)
            assert proc.stderr is not None  # piped above
            stderr = proc.stderr.read()
            proc.wait()
        finally:
            timer.cancel()
    if proc.returncode != 0 or result is None:
        raise RuntimeError(f"the replay stopped (exit {proc.returncode}): {stderr.strip()[-400:]}")
    return result


def _relay(impact: ImpactReplay, proc: subprocess.Popen) -> dict | None:
    result = None
    assert proc.stdout is not None  # the caller pipes it
    for line in proc.stdout:
        if line.startswith("PROGRESS "):
            _, pct, message = (line.rstrip("\n").split(" ", 2) + [""])[:3]
            _update(impact, progress=min(99, int(pct)), message=message[:500])
        elif line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
    return result
