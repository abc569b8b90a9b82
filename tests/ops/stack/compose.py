"""The compose stack (docker-compose.yml, unchanged) brought up with podman-compose, and the
operations the tests do to it: a service's container killed, stopped, started or restarted,
a command run in one, its address on the compose network.

Only test tooling uses this; the product knows nothing of it."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import requests
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_FILE = ROOT / "docker-compose.yml"
WEB_SERVICES = ("web-1", "web-2")
APP_SERVICES = (*WEB_SERVICES, "worker-1", "worker-2", "beat")
AARDVARK_DIR = Path("/run/containers/networks/aardvark-dns")
# the commit the running stack was brought up at (results name it; HEAD may move meanwhile)
STACK_MADE: dict = {"commit": "", "tree_differs": False}


def run(argv: list[str], *, timeout: float = 120, stdin: str | None = None, env: dict | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, env=env)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])}... exited {done.returncode}: {done.stderr[-2000:]}")
    return done


@dataclass
class Stack:
    project: str
    port: int
    env: dict[str, str]
    events: list[tuple[float, str]] = field(default_factory=list)

    cert: str = ""  # the proxy's certificate, read from its volume once it is up

    @property
    def network(self) -> str:
        return f"{self.project}_default"

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    def read_cert(self) -> str:
        """The proxy's self-signed certificate in a file here: every request checks it."""
        pem = self.exec("proxy", ["cat", "/etc/gpubroker-proxy/tls.crt"])
        fd, path = tempfile.mkstemp(prefix="gpubroker-stack-", suffix=".crt")
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        self.cert = path
        return path

    def _compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        # podman-compose prints each podman command with its environment (the secret key
        # included): kept in this process, never echoed
        return run(["podman-compose", "-f", str(COMPOSE_FILE), "-p", self.project, *args],
                   timeout=timeout, env={**os.environ, **self.env})

    def note(self, what: str) -> None:
        self.events.append((time.time(), what))

    def up(self) -> None:
        self.note("up")
        STACK_MADE["commit"] = run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=False).stdout.strip()
        status = ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"]
        STACK_MADE["tree_differs"] = bool(run(status, check=False).stdout)
        # db and redis first (podman-compose 1.0.3 does not wait for health checks)
        self._compose("up", "-d", "db", "redis")
        self.wait_db()
        self._compose("up", "-d")
        self.wait_healthy()

    def down(self) -> None:
        self._compose("down", "-v", timeout=600)
        run(["podman", "network", "rm", "-f", self.network], check=False)
        run(["podman", "volume", "rm", "-f", f"{self.project}_db-data", f"{self.project}_proxy-tls"], check=False)
        self._forget_dns()

    def _forget_dns(self) -> None:
        """aardvark-dns's file of the network, if it outlived the network. Containers removed
        by a podman on another network backend (CNI) are never torn down by netavark: their
        records stay, and the file's first line keeps the old network's gateway. A network
        made again under the same name gets a new subnet (the old bridge still holds its
        route), netavark appends to that file, and aardvark-dns answers on the old gateway
        only: no container resolves "db" and the stack never becomes healthy (CI, 2026-12-07,
        two runs: the proxy's log "<NOSRV> 503", migrate's "failed to resolve host 'db'")."""
        if run(["podman", "network", "exists", self.network], check=False).returncode == 0:
            return
        try:
            (AARDVARK_DIR / self.network).unlink(missing_ok=True)
        except OSError as exc:
            self.note(f"aardvark-dns's file of {self.network} not removed: {exc}")

    def container(self, service: str) -> str:
        out = run(["podman", "ps", "-a", "--format", "{{.Names}}",
                   "--filter", f"label=io.podman.compose.project={self.project}",
                   "--filter", f"label=com.docker.compose.service={service}"]).stdout.split()
        if len(out) != 1:
            raise RuntimeError(f"service {service}: containers {out}")
        return out[0]

    def exec(self, service: str, argv: list[str], *, stdin: str | None = None, timeout: float = 120,
             env: dict[str, str] | None = None) -> str:
        extra = [f"--env={k}={v}" for k, v in (env or {}).items()]
        return run(["podman", "exec", "-i", *extra, self.container(service), *argv],
                   stdin=stdin, timeout=timeout).stdout

    def manage_shell(self, code: str, **env: str) -> str:
        """``code`` (idempotent) run by manage.py shell in web-1; tried three times, since the
        network's DNS (aardvark-dns) misses names for a moment while containers join it."""
        for attempt in range(3):
            try:
                return self.exec("web-1", ["python", "manage.py", "shell"], stdin=code, env=env, timeout=180)
            except RuntimeError:
                if attempt == 2:
                    raise
                time.sleep(5)
        raise AssertionError("unreachable")

    def kill(self, service: str) -> None:
        self.note(f"kill -9 {service}")
        run(["podman", "kill", "--signal", "KILL", self.container(service)])

    def stop(self, *services: str) -> None:
        self.note(f"stop {' '.join(services)}")
        run(["podman", "stop", "--time", "10", *[self.container(s) for s in services]], timeout=300)

    def start(self, *services: str) -> None:
        self.note(f"start {' '.join(services)}")
        run(["podman", "start", *[self.container(s) for s in services]], timeout=300)

    def restart(self, service: str) -> None:
        self.note(f"restart {service}")
        run(["podman", "restart", "--time", "10", self.container(service)], timeout=300)

    def address(self, service: str) -> str:
        info = json.loads(run(["podman", "inspect", self.container(service)]).stdout)[0]
        networks = info["NetworkSettings"]["Networks"]
        return next(iter(networks.values()))["IPAddress"]

    def db_url(self) -> str:
        """The stack's database as this host reaches it (rootful podman: the bridge is routed)."""
        return f"postgres://gpubroker:gpubroker@{self.address('db')}:5432/gpubroker"

    def scrape(self, *, token: bool = True) -> "requests.Response":
        """GET /metrics through the proxy, as Prometheus does (with the stack's token)."""
        headers = {"Authorization": f"Bearer {self.env['GPUBROKER_METRICS_TOKEN']}"} if token else {}
        return requests.get(f"{self.url}/metrics", headers=headers, verify=self.cert, timeout=30)

    def logs(self, service: str, since: float | None = None) -> str:
        args = ["podman", "logs"]
        if since is not None:
            args += ["--since", str(int(since))]
        done = run([*args, self.container(service)], check=False, timeout=60)
        return done.stdout + done.stderr

    def wait_db(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = run(["podman", "exec", self.container("db"), "pg_isready", "-U", "gpubroker"], check=False)
            if done.returncode == 0:
                return
            time.sleep(1)
        # what it said while not getting ready (a cold CI run, 2026-12-06, gave up with no word)
        states = run(["podman", "ps", "-a", "--format", "{{.Names}} {{.Status}}",
                      "--filter", f"label=io.podman.compose.project={self.project}"], check=False).stdout
        raise RuntimeError(f"the stack's PostgreSQL did not get ready in {timeout:g} s; containers:\n{states}"
                           f"its log, last lines:\n{self.logs('db')[-3000:]}")

    def healthz(self) -> bool:
        return self.served_by() is not None

    def wait_healthy(self, timeout: float = 300) -> float:
        """Until /healthz answers through the proxy and every app container runs; seconds waited."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.healthz() and all(self.running(s) for s in APP_SERVICES):
                return time.monotonic() - t0
            time.sleep(1)
        raise RuntimeError(f"the stack did not become healthy within {timeout:.0f} s")

    def served_by(self) -> str | None:
        """Which web process answered /healthz through the proxy (its X-Served-By header);
        None unless it answered 200."""
        try:
            if not self.cert:
                self.read_cert()
            context = ssl.create_default_context(cafile=self.cert)
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=5, context=context) as r:
                return r.headers.get("X-Served-By", "") if r.status == 200 else None
        except (urllib.error.URLError, OSError, RuntimeError):
            return None

    def wait_serving(self, *services: str, timeout: float = 120, steady_s: float = 4.0) -> None:
        """Until the proxy has routed to each of these web processes and answered every request
        for ``steady_s`` (two of its health checks): a web process just started is taken on
        when its name resolves again, before a check has passed, and can be dropped once more
        by its first check (the proxy's log, 2026-12-05: "UP/READY (resolves again)", then
        "DOWN ... Connection refused")."""
        deadline = time.monotonic() + timeout
        since, seen = time.monotonic(), set()
        while time.monotonic() < deadline:
            by = self.served_by()
            if by is None:
                since, seen = time.monotonic(), set()
            else:
                seen.add(by)
                if seen >= set(services) and time.monotonic() - since >= steady_s:
                    return
            time.sleep(0.25)
        raise RuntimeError(f"the proxy did not route steadily to {', '.join(services)} within {timeout:.0f} s "
                           f"(answered by {sorted(seen)} since the last failed request)")

    def restart_counts(self) -> dict[str, int]:
        """How often the engine restarted each service's container by itself (restart policy)."""
        services = ("db", "redis", "proxy", *APP_SERVICES)
        return {s: int(run(["podman", "inspect", "--format", "{{.RestartCount}}", self.container(s)]).stdout.strip()
                       or 0) for s in services}

    def running(self, service: str) -> bool:
        info = json.loads(run(["podman", "inspect", self.container(service)]).stdout)[0]
        return bool(info["State"]["Running"])

    def network_report(self) -> str:
        """What a failed stack test prints: each service's state, restarts and address, the
        records the network's DNS (aardvark-dns) holds for its name, what a web process resolves
        the name to, and the last errors in its log. A restarted container comes back under a
        new address; a record or an answer that still names the old one shows here."""
        listens_on, records = _aardvark(AARDVARK_DIR / self.network)
        asker = next((s for s in ("web-1", "web-2", "proxy") if self._safe(lambda s=s: self.running(s))), "proxy")
        lines = [f"network report ({time.strftime('%H:%M:%S')}, names resolved in {asker}):",
                 f"  aardvark-dns answers on {listens_on}; the network's gateway is {_or_why(self.gateway)}"]
        for service in ("db", "redis", "proxy", *APP_SERVICES):
            lines.append(self._service_line(service, records, asker))
        for service in ("redis", "web-1", "web-2", "proxy"):
            errors = [x for x in self.logs(service).splitlines()[-400:]
                      if any(w in x for w in ("Error", "ERROR", "Traceback", "refused", "resolve", "<NOSRV>",
                                           "DOWN", " is UP", "no server"))]
            lines += [f"  {service} log: {x[:300]}" for x in errors[-6:]]
        return "\n".join(lines)

    def _service_line(self, service: str, records: dict[str, list[str]], asker: str) -> str:
        try:
            info = json.loads(run(["podman", "inspect", self.container(service)]).stdout)[0]
        except RuntimeError as exc:
            return f"  {service}: not inspected ({str(exc)[-120:]})"
        networks = info["NetworkSettings"]["Networks"]
        address = next(iter(networks.values()))["IPAddress"] if networks else ""
        resolved = run(["podman", "exec", self.container(asker), "getent", "ahostsv4", service],
                       check=False, timeout=30).stdout.split()
        answers = sorted({word for word in resolved if word.count(".") == 3})
        return (f"  {service}: {info['State']['Status']}, restarts {info.get('RestartCount', '?')}, "
                f"address {address or '-'}, DNS records {records.get(service, [])}, resolves to {answers}")

    def gateway(self) -> str:
        """The compose network's gateway: this host as the containers reach it."""
        info = json.loads(run(["podman", "network", "inspect", self.network]).stdout)[0]
        return str(info["subnets"][0]["gateway"])

    @staticmethod
    def _safe(check) -> bool:
        try:
            return bool(check())
        except (RuntimeError, subprocess.SubprocessError, KeyError, IndexError):
            return False


def _or_why(read) -> str:
    try:
        return str(read())
    except (RuntimeError, subprocess.SubprocessError, KeyError, IndexError, ValueError) as exc:
        return f"(not read: {str(exc)[-120:]})"


def _aardvark(path: Path) -> tuple[str, dict[str, list[str]]]:
    """aardvark-dns's file of one network: the address it answers on (the first line), and its
    records, name -> addresses (a line per container, "id address(es) names,comma-separated")."""
    out: dict[str, list[str]] = {}
    try:
        listens_on, *lines = path.read_text().splitlines()
    except (OSError, ValueError):
        return "(no file)", {}
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        for name in parts[-1].split(","):
            out.setdefault(name, []).append(parts[1])
    return listens_on.strip(), out
