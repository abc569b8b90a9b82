"""Researchers at the portal through the proxy while faults are injected: each a thread that
signs in, then submits (an Idempotency-Key per submission, retried with the same key while the
portal cannot answer, as the CLI does), polls, lists and cancels, with a think time of 1-3 s.
A submission counts as acknowledged only once it got its 201."""

from __future__ import annotations

import random
import threading
import time
import uuid

import requests

from tests.ops.stack.client import Person

RETRYABLE = {502, 503, 504, 500}


class Researcher(threading.Thread):
    def __init__(self, base: str, cert: str, name: str, password: str, project: int, until: float, seed: int):
        super().__init__(daemon=True)
        self.base, self.cert, self.name_, self.password, self.project = base, cert, name, password, project
        self.until, self.rng = until, random.Random(seed)
        self.acked: dict[str, int] = {}      # submission name -> workload id (201)
        self.unanswered: list[str] = []      # submissions never acknowledged, retries spent
        self.failures: list[str] = []        # requests that failed (any operation)
        self.requests = 0

    def _call(self, fn):
        """One request, retried (up to 20 times, 1 s apart) while the portal cannot answer."""
        for _ in range(20):
            self.requests += 1
            try:
                r = fn()
            except requests.RequestException as exc:
                self.failures.append(type(exc).__name__)
            else:
                if r.status_code not in RETRYABLE:
                    return r
                self.failures.append(str(r.status_code))
            time.sleep(1)
        return None

    def run(self) -> None:
        person = None
        while person is None and time.time() < self.until:
            try:
                person = Person(self.base, self.name_, self.password, cert=self.cert)
            except (AssertionError, requests.RequestException) as exc:
                self.failures.append(f"sign-in: {str(exc)[:80]}")
                time.sleep(1)
        n = 0
        while person is not None and time.time() < self.until:
            op = self.rng.choices(("submit", "poll", "list", "cancel"), (25, 40, 20, 15))[0]
            if op == "submit":
                n += 1
                self._submit(person, f"{self.name_}-{n}")
            elif op == "poll" and self.acked:
                wid = self.rng.choice(list(self.acked.values()))
                self._call(lambda: person.get(f"/api/v1/workloads/{wid}/"))
            elif op == "list":
                self._call(lambda: person.get("/api/v1/workloads/", params={"limit": 20}))
            elif op == "cancel" and self.acked:
                wid = self.rng.choice(list(self.acked.values()))
                self._call(lambda: person.post(f"/api/v1/workloads/{wid}/cancel/"))
            time.sleep(self.rng.uniform(1, 3))

    def _submit(self, person: Person, name: str) -> None:
        body = {"project": self.project, "name": name, "command": f"sleep {self.rng.randint(2, 8)}",
                "gpu_class": "a100-80gb", "gpus_per_worker": self.rng.choice((1, 1, 2, 4)), "workers": 1,
                # small CPU and memory asks: the test cluster's nodes (16 CPUs, 32 GB) then run
                # jobs until their GPUs are taken (the default 16 GB let one job a node run)
                "cpus_per_worker": 2, "memory_gb_per_worker": 2, "time_limit_minutes": 5}
        key = str(uuid.uuid4())
        headers = {**person._headers(), "Idempotency-Key": key}
        r = self._call(lambda: person.s.post(f"{self.base}/api/v1/workloads/", json=body, headers=headers,
                                             timeout=30, verify=self.cert))
        if r is not None and r.status_code == 201:
            self.acked[name] = int(r.json()["id"])
        else:
            self.unanswered.append(name)
            if r is not None:
                self.failures.append(f"submit {r.status_code}: {r.text[:120]}")
