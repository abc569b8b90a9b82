"""Simultaneous retries of one POST with one Idempotency-Key, against the demo server on its
SQLite file (see tests/portal/test_sqlite_concurrency.py): one workload, every answer names it."""
from __future__ import annotations

import threading

from django.urls import reverse

from tests.portal.test_sqlite_concurrency import _project_id, _session, _workload_names, demo_server  # noqa: F401

RETRIES = 8


def test_simultaneous_retries_with_one_key_make_one_workload(demo_server):  # noqa: F811
    base, db = demo_server
    url = base + reverse("api-workloads")
    body = {"project": _project_id(db), "name": "retried", "command": "python train.py", "gpu_class": "a100-80gb",
            "gpus_per_worker": 1, "workers": 1, "time_limit_minutes": 30}
    sessions = [_session(base) for _ in range(RETRIES)]
    start = threading.Barrier(RETRIES)
    answers: dict[int, tuple[int, int | None]] = {}

    def post(i: int) -> None:
        start.wait()
        response = sessions[i].post(url, json=body, headers={"Idempotency-Key": "one-key"}, timeout=120)
        answers[i] = (response.status_code, response.json().get("id"))

    threads = [threading.Thread(target=post, args=(i,)) for i in range(RETRIES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)

    codes = sorted(code for code, _ in answers.values())
    assert len(answers) == RETRIES and codes == [200] * (RETRIES - 1) + [201], answers
    assert len({workload_id for _, workload_id in answers.values()}) == 1
    assert _workload_names(db).count("retried") == 1
