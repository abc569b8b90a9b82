"""A person at the portal, through the proxy: signs in through the login form (CSRF token,
session cookie) and then uses the API v1 as the pages' scripts do."""

from __future__ import annotations

import re
import time

import requests


class Person:
    def __init__(self, base: str, username: str, password: str, *, cert: str):
        """``cert``: the proxy's certificate (self-signed for localhost), which requests are
        checked against; passed with every request, since REQUESTS_CA_BUNDLE in the
        environment would override a session's own setting."""
        self.base, self.username, self.cert = base, username, cert
        self.s = requests.Session()
        form = self.s.get(f"{base}/login/", timeout=30, verify=cert)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        if token is None:
            raise AssertionError(f"no sign-in form at {base}/login/: {form.status_code} {form.text[:200]}")
        r = self.s.post(f"{base}/login/", data={"username": username, "password": password,
                                                  "csrfmiddlewaretoken": token.group(1)},
                        headers={"Referer": f"{base}/login/"}, allow_redirects=False, timeout=60, verify=cert)
        if r.status_code != 302 or "sessionid" not in self.s.cookies:
            raise AssertionError(f"sign-in of {username}: {r.status_code} {r.text[:200]}")

    def _headers(self) -> dict:
        return {"X-CSRFToken": self.s.cookies.get("csrftoken", ""), "Referer": self.base + "/"}

    def get(self, path: str, **kw) -> requests.Response:
        return self.s.get(self.base + path, timeout=30, verify=self.cert, **kw)

    def post(self, path: str, body: dict | None = None) -> requests.Response:
        return self.s.post(self.base + path, json=body or {}, headers=self._headers(), timeout=30, verify=self.cert)

    def submit(self, project: int, name: str, *, seconds: int, gpus: int = 1, workers: int = 1) -> int:
        # 2 CPUs and 2 GB: the test cluster's nodes (16 CPUs, 32 GB) run jobs until their GPUs
        # are taken; the default 16 GB let one job a node run
        body = {"project": project, "name": name, "command": f"sleep {seconds}", "gpu_class": "a100-80gb",
                "gpus_per_worker": gpus, "workers": workers, "cpus_per_worker": 2, "memory_gb_per_worker": 2,
                "time_limit_minutes": 15}
        r = self.post("/api/v1/workloads/", body)
        if r.status_code != 201:
            raise AssertionError(f"submit {name}: {r.status_code} {r.text[:300]}")
        return int(r.json()["id"])

    def workload(self, wid: int) -> dict:
        r = self.get(f"/api/v1/workloads/{wid}/")
        r.raise_for_status()
        return r.json()

    def sent_attempts(self, wid: int) -> list[dict]:
        """The workload's dispatch attempts that reached a cluster (they carry its job id)."""
        attempts = self.get(f"/api/v1/workloads/{wid}/attempts/").json()
        attempts = attempts.get("results", attempts) if isinstance(attempts, dict) else attempts
        return [a for a in attempts if a.get("destination_job_id")]

    def wait_state(self, wid: int, states: set[str], timeout: float) -> dict:
        deadline, seen = time.monotonic() + timeout, []
        while time.monotonic() < deadline:
            w = self.workload(wid)
            if not seen or seen[-1] != w["state"]:
                seen.append(w["state"])
            if w["state"] in states:
                w["states_seen"] = seen
                return w
            time.sleep(1)
        raise AssertionError(f"workload {wid} did not reach {sorted(states)} in {timeout:.0f} s: states {seen}")
