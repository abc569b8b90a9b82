"""Load: concurrent researchers against the full stack, over HTTP.

    .venv/bin/python bench/load_researchers.py --researchers 50 --duration 60

Starts what it measures: a scratch PostgreSQL database (created, migrated, seeded, dropped
at the end unless --keep-db), gunicorn serving the portal, a Celery worker and Celery beat
on Redis.  The clusters are journal clusters (broker/faults/journal.py, a SQLite file every
process shares), so the jobs that reach a destination can be counted from here.

Each researcher is a thread with its own ``requests.Session``: it logs in through the login
form (CSRF token from the form, session cookie), then until the time is up submits
workloads (POST /api/workloads/), polls them (GET /api/workloads/<id>/), lists its
project's workloads, opens the workload page, and cancels some (POST .../cancel/), with a
think time between requests.  Afterwards it waits for the broker to place and dispatch
everything, then checks in the database and at the destinations:

* lost: a submission answered 201 whose workload is not in the database, or that never
  left ``submitted``, or was dispatched but has no job at its destination;
* duplicated: two workloads for one submission (names are unique per request), or two
  destination jobs for one workload.

Prints throughput, p50/p95/p99 per operation, and the checks; writes JSON to
test-artifacts/load-researchers.json.  Exit status 1 when anything was lost or duplicated,
a request failed, or p95 of submit is at or above --p95-limit-ms (default 200).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OPS = ("login", "warmup", "submit", "poll", "list", "page", "cancel")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--researchers", type=int, default=50)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load after every login")
    p.add_argument("--think", default="1,3", help="think time between requests, min,max seconds (the workload "
                   "page itself polls every 2 s)")
    p.add_argument("--cancel-share", type=float, default=0.1, help="share of a researcher's workloads cancelled")
    p.add_argument("--database-url", default=os.environ.get("LOAD_DATABASE_URL",
                                                             "postgres://postgres@127.0.0.1:5432/gpubroker_load"))
    p.add_argument("--redis-url", default=os.environ.get("LOAD_REDIS_URL", "redis://127.0.0.1:6379/13"))
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--gunicorn-workers", type=int, default=max(2, (os.cpu_count() or 1) + 1))
    p.add_argument("--gunicorn-threads", type=int, default=4)
    p.add_argument("--worker-concurrency", type=int, default=2)
    p.add_argument("--p95-limit-ms", type=float, default=200.0)
    p.add_argument("--drain-timeout", type=float, default=180.0)
    p.add_argument("--keep-db", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2, help="untimed submissions per researcher before the clock starts")
    p.add_argument("--out", default=str(ROOT / "test-artifacts" / "load-researchers.json"))
    return p.parse_args(argv)


# ---------------------------------------------------------------------------- the stack

def _db_admin(url: str):
    import psycopg

    parts = urlsplit(url)
    return psycopg.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 5432,
                           user=parts.username or "postgres", password=parts.password or None,
                           dbname="postgres", autocommit=True)


def recreate_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise SystemExit(f"--database-url: database name {name!r} must be plain")
    with _db_admin(url) as con:
        con.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])
        con.execute(f'DROP DATABASE IF EXISTS "{name}"')
        con.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with _db_admin(url) as con:
        con.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])
        con.execute(f'DROP DATABASE IF EXISTS "{name}"')


class Stack:
    def __init__(self, args, folder: Path, journal: str):
        self.args, self.folder, self.journal = args, folder, journal
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "DATABASE_URL": args.database_url, "CELERY_BROKER_URL": args.redis_url,
                    "PYTHONPATH": str(ROOT), "GPUBROKER_ALLOWED_HOSTS": "127.0.0.1,localhost",
                    "GPUBROKER_SECRET_KEY": "load-bench-" + "x" * 40, "GPUBROKER_FAULTS_JOURNAL": journal,
                    "GPUBROKER_LOG_LEVEL": "WARNING"}     # beat at the portal's default intervals

    def start(self) -> None:
        a = self.args
        self._spawn("gunicorn", [sys.executable, "-m", "gunicorn", "config.wsgi:application",
                                 "-b", f"127.0.0.1:{a.port}", "-w", str(a.gunicorn_workers),
                                 "--threads", str(a.gunicorn_threads), "--worker-class", "gthread",
                                 "--log-level", "warning", "--timeout", "60",
                                 # longer than any think time: a connection the server drops
                                 # while the client reuses it would read as a failed request
                                 "--keep-alive", "30"])
        self._spawn("worker", [sys.executable, "-m", "broker.faults.worker", "-l", "warning", "--pool", "threads",
                               "--concurrency", str(a.worker_concurrency), "-n", f"load-{os.getpid()}@%h",
                               "--without-gossip", "--without-mingle", "--without-heartbeat"])
        self._spawn("beat", [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "warning",
                             "-s", str(self.folder / "beat-schedule")])
        import requests

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise SystemExit(f"{name} exited: {(self.folder / f'{name}.log').read_text()[-2000:]}")
            try:
                if requests.get(f"http://127.0.0.1:{a.port}/healthz", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise SystemExit("gunicorn did not answer /healthz within 60 s")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.folder / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def seed(args, journal_path: str) -> list[tuple[str, str, int]]:
    """Tenants, projects, one user per researcher, quotas, two journal clusters."""
    from decimal import Decimal

    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from broker.faults.journal import Journal
    from broker.models import Cluster, Quota
    from broker.services.fleet.registration import gpu_classes_from_policy
    from portal.tenancy.models import Role
    from portal.tenancy.services.tenants import member_ensure, project_ensure, tenant_ensure, user_ensure

    classes = {c.slug: c for c in gpu_classes_from_policy()}
    journal = Journal(journal_path)
    for i, name in enumerate(("load-onprem", "load-cloud")):
        journal.add_cluster(name, nodes=16, gpus_per_node=8, time_scale=120.0)
        Cluster.objects.create(name=name, kind="simulator", region="eu-west", location=("onprem", "cloud")[i],
                               price_per_gpu_hour=Decimal("1.0") + i, config={"image_pull_s": 0})
    users = []
    tenants = [tenant_ensure(slug=f"load-t{i}", name=f"Load tenant {i}") for i in range(5)]
    projects = []
    for i, tenant in enumerate(tenants):
        projects.append(project_ensure(tenant=tenant, slug=f"load-p{i}", name=f"Load project {i}",
                                       slurm_account=f"loadp{i}", k8s_namespace=f"load-p{i}",
                                       cost_centre=f"LD-{i}"))
        Quota.objects.create(tenant=tenant, gpu_class=classes["a100-80gb"], limit_gpus=100000)
    for n in range(args.researchers):
        username, password = f"load-r{n}", f"load-pw-{n}-{args.seed}"
        user = user_ensure(username=username, password=password)
        project = projects[n % len(projects)]
        member_ensure(user=user, tenant=project.tenant, role=Role.RESEARCHER)
        users.append((username, password, project.id))
    return users


# ---------------------------------------------------------------------------- the researchers

class Researcher(threading.Thread):
    def __init__(self, index: int, base: str, username: str, password: str, project_id: int, args,
                 start_gate: threading.Event, stop_at: list[float], rng: random.Random):
        super().__init__(name=f"researcher-{index}", daemon=True)
        self.index, self.base, self.username, self.password = index, base, username, password
        self.project_id, self.args, self.start_gate, self.stop_at, self.rng = project_id, args, start_gate, stop_at, rng
        self.timings: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.submitted: dict[str, int] = {}      # name -> workload id (201s)
        self.attempted: list[str] = []           # names of every submit sent
        self.cancelled: set[int] = set()
        self.logged_in = threading.Event()
        self.think = tuple(float(x) for x in args.think.split(","))

    def _timed(self, op: str, fn):
        t0 = time.perf_counter()
        try:
            response = fn()
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            self.errors.append(f"{op}: {exc!r}")
            return None
        self.timings[op].append(time.perf_counter() - t0)
        return response

    def run(self) -> None:
        import requests

        s = requests.Session()
        self.session = s
        n = 0
        try:
            self._login(s)
            # warm-up, not timed: a running portal has its connections open and templates loaded
            for _ in range(self.args.warmup):
                self._submit(s, n, timed=False)
                n += 1
                s.get(f"{self.base}/api/workloads/?limit=20", timeout=30)
        finally:
            self.logged_in.set()
        self.start_gate.wait()
        while time.monotonic() < self.stop_at[0]:
            roll = self.rng.random()
            ids = list(self.submitted.values())
            if roll < 0.35 or not ids:
                self._submit(s, n)
                n += 1
            elif roll < 0.65:
                self._expect("poll", s.get, f"{self.base}/api/workloads/{self.rng.choice(ids)}/", 200)
            elif roll < 0.8:
                self._expect("list", s.get, f"{self.base}/api/workloads/?limit=20", 200)
            elif roll < 0.9:
                self._expect("page", s.get, f"{self.base}/workloads/{self.rng.choice(ids)}/", 200)
            elif self.rng.random() < self.args.cancel_share * 10:
                live = [i for i in ids if i not in self.cancelled]
                if live:
                    wid = self.rng.choice(live)
                    if self._expect("cancel", s.post, f"{self.base}/api/workloads/{wid}/cancel/", 202,
                                    headers=self._csrf(s)):
                        self.cancelled.add(wid)
            time.sleep(self.rng.uniform(*self.think))

    def _csrf(self, s) -> dict:
        return {"X-CSRFToken": s.cookies.get("csrftoken", ""), "Referer": self.base + "/"}

    def _login(self, s) -> None:
        def go():
            form = s.get(f"{self.base}/login/", timeout=30)
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
            return s.post(f"{self.base}/login/", data={"username": self.username, "password": self.password,
                                                       "csrfmiddlewaretoken": token},
                          headers={"Referer": f"{self.base}/login/"}, allow_redirects=False, timeout=60)
        r = self._timed("login", go)
        if r is None or r.status_code != 302 or "sessionid" not in s.cookies:
            self.errors.append(f"login: {getattr(r, 'status_code', None)}")

    def _submit(self, s, n: int, timed: bool = True) -> None:
        name = f"r{self.index}-{n}"
        self.attempted.append(name)
        body = {"project": self.project_id, "name": name, "command": "python train.py", "gpu_class": "a100-80gb",
                "gpus_per_worker": self.rng.choice((1, 2, 4, 8)), "workers": self.rng.choice((1, 1, 2)),
                "time_limit_minutes": self.rng.choice((5, 10, 20))}
        r = self._expect("submit" if timed else "warmup", s.post, f"{self.base}/api/workloads/", 201, json=body,
                         headers=self._csrf(s))
        if r is not None:
            self.submitted[name] = r.json()["id"]

    def _expect(self, op: str, method, url: str, status: int, **kwargs):
        r = self._timed(op, lambda: method(url, timeout=30, **kwargs))
        if r is not None and r.status_code != status:
            self.errors.append(f"{op} {url}: {r.status_code} {r.text[:200]}")
            return None
        return r


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# ---------------------------------------------------------------------------- the checks

def check(researchers: list[Researcher], journal_path: str, drain_timeout: float) -> dict:
    from broker.faults.journal import Journal
    from broker.models import Workload

    acked = {name: wid for r in researchers for name, wid in r.submitted.items()}
    deadline = time.monotonic() + drain_timeout
    while time.monotonic() < deadline:
        waiting = Workload.objects.filter(id__in=acked.values(), state__in=(
            "submitted", "reserved", "dispatching")).count()
        if not waiting:
            break
        time.sleep(1.0)
    rows = list(Workload.objects.filter(project__slug__startswith="load-").values_list(
        "id", "name", "uid", "state", "destination_job_id"))
    by_name = defaultdict(list)
    for row in rows:
        by_name[row[1]].append(row)
    jobs = defaultdict(list)
    for job in Journal(journal_path).all_jobs():
        jobs[job["workload_id"]].append(job)
    lost, duplicated = [], []
    for name, wid in acked.items():
        found = by_name.get(name, [])
        if not any(r[0] == wid for r in found):
            lost.append(f"{name}: answered 201 as {wid}, not in the database")
    for name, found in by_name.items():
        if len(found) > 1:
            duplicated.append(f"{name}: {len(found)} workloads")
        for wid, _, uid, state, dest in found:
            n = len(jobs.get(uid, []))
            if n > 1:
                duplicated.append(f"{name}: {n} destination jobs")
            if state in ("submitted", "reserved", "dispatching"):
                lost.append(f"{name}: still {state} after the drain")
            elif state in ("queued", "running", "completed") and n != 1:
                lost.append(f"{name}: {state} but {n} destination jobs")
    unacked = set(by_name) - set(acked)
    states = defaultdict(int)
    for row in rows:
        states[row[3]] += 1
    return {"acknowledged": len(acked), "in_database": len(rows), "stored_without_201": len(unacked),
            "lost": len(lost), "duplicated": len(duplicated), "examples": (lost + duplicated)[:10],
            "states": dict(states), "destination_jobs": sum(len(v) for v in jobs.values())}


def report(args, researchers: list[Researcher], elapsed: float, checks: dict) -> dict:
    timings = defaultdict(list)
    errors = []
    for r in researchers:
        for op, values in r.timings.items():
            timings[op].extend(values)
        errors.extend(r.errors)
    ops = {}
    for op in OPS:
        values = timings.get(op, [])
        if not values:
            continue
        untimed = op in ("login", "warmup")
        ops[op] = {"requests": len(values), "per_s": None if untimed else round(len(values) / elapsed, 2),
                   "p50_ms": round(percentile(values, 0.50) * 1000, 1),
                   "p95_ms": round(percentile(values, 0.95) * 1000, 1),
                   "p99_ms": round(percentile(values, 0.99) * 1000, 1),
                   "max_ms": round(max(values) * 1000, 1)}
    total = sum(v["requests"] for k, v in ops.items() if k not in ("login", "warmup"))
    return {"researchers": args.researchers, "duration_s": round(elapsed, 1), "think_s": args.think,
            "gunicorn": f"{args.gunicorn_workers} workers x {args.gunicorn_threads} threads",
            "celery_worker_concurrency": args.worker_concurrency, "cpus": os.cpu_count(),
            "requests": total, "throughput_per_s": round(total / elapsed, 1), "operations": ops,
            "errors": len(errors), "error_examples": errors[:10], **checks}


def print_report(result: dict, p95_limit: float) -> None:
    print(f"\n{result['researchers']} researchers for {result['duration_s']} s (think {result['think_s']} s), "
          f"gunicorn {result['gunicorn']}, Celery worker x{result['celery_worker_concurrency']}, "
          f"{result['cpus']} CPUs")
    print(f"throughput: {result['throughput_per_s']} requests/s ({result['requests']} requests, "
          f"{result['errors']} failed)\n")
    print("| operation | requests | per s | p50 ms | p95 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for op, v in result["operations"].items():
        print(f"| {op} | {v['requests']} | {v['per_s'] if v['per_s'] is not None else '-'} | {v['p50_ms']} | "
              f"{v['p95_ms']} | {v['p99_ms']} | {v['max_ms']} |")
    print(f"\nworkloads: {result['acknowledged']} submitted (201), {result['in_database']} in the database, "
          f"{result['destination_jobs']} destination jobs; states {result['states']}")
    print(f"lost: {result['lost']}   duplicated: {result['duplicated']}   stored without a 201: "
          f"{result['stored_without_201']}")
    for e in result["examples"] + result["error_examples"]:
        print("  ", e)
    p95 = result["operations"].get("submit", {}).get("p95_ms", float("inf"))
    ok = result["lost"] == 0 and result["duplicated"] == 0 and result["errors"] == 0 and p95 < p95_limit
    print(f"RESULT: {'PASS' if ok else 'FAIL'} (submit p95 {p95} ms, limit {p95_limit} ms)")
    result["ok"] = ok


def main(argv=None) -> int:
    args = parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="load-researchers-"))
    journal = str(folder / "journal.sqlite3")
    os.environ.update({"DATABASE_URL": args.database_url, "CELERY_BROKER_URL": args.redis_url,
                       "DJANGO_SETTINGS_MODULE": "config.settings"})
    recreate_database(args.database_url)
    import django

    django.setup()
    import redis

    redis.Redis.from_url(args.redis_url).flushdb()
    users = seed(args, journal)
    stack = Stack(args, folder, journal)
    rng = random.Random(args.seed)
    try:
        stack.start()
        base = f"http://127.0.0.1:{args.port}"
        gate, stop_at = threading.Event(), [float("inf")]
        researchers = [Researcher(i, base, u, p, pid, args, gate, stop_at, random.Random(rng.random()))
                       for i, (u, p, pid) in enumerate(users)]
        for r in researchers:
            r.start()
        for r in researchers:
            r.logged_in.wait(300)
        started = time.monotonic()
        stop_at[0] = started + args.duration
        gate.set()
        for r in researchers:
            r.join(args.duration + 120)
        elapsed = time.monotonic() - started
        checks = check(researchers, journal, args.drain_timeout)
        result = report(args, researchers, elapsed, checks)
    finally:
        stack.stop()
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            drop_database(args.database_url)
    print_report(result, args.p95_limit_ms)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"(logs in {folder}; JSON in {args.out})")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
