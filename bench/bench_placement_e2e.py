"""Placement end to end: waiting workloads placed, reserved and dispatched to the simulator
by real Celery worker processes over Redis, on PostgreSQL.

    .venv/bin/python bench/bench_placement_e2e.py [--count 10000] [--clusters 20] [--nodes 160]
        [--workers 1,2] [--quick] [--in-process]

Each round starts from an empty database (``gpubroker_bench``, created when missing; every
table is flushed) and an empty Redis database (14):

* the fleet: ``--clusters`` simulated Kueue clusters of ``--nodes`` nodes x 8 A100s, written
  to a fleet file that the workers load (``GPUBROKER_FLEET_FILE``, ``GPUBROKER_SIM_AUTOLOAD``),
  registered as clusters and their inventory synced once (nothing reports again: what the broker sends is counted by
  its promised-GPUs selector);
* four tenants, a project each, quotas large enough for everything;
* ``--count`` workloads submitted through ``workload_submit`` (the service the API and form
  call) with its follow-up placement task dropped, so they are all waiting when timing starts.

Then ``--workers`` worker processes (``celery -A config worker --concurrency 1`` each) are
started; the clock starts when the first ``place_waiting`` is queued and stops when every
workload is ``queued`` or ``running`` at its simulated cluster.  A pass places up to its
limit and queues the next pass itself while due work is left (``broker.tasks.place_waiting``);
each chunk of up to 50 placements it writes queues one ``dispatch_workloads`` task
(``broker.services.dispatching.chunk``).  Printed: workloads/s for each worker count, their
ratio, the load average, and the queries of one pass and of its dispatch tasks, measured in
this process with ``--clusters`` and with twice as many clusters (the same workloads).

``--in-process``: no Celery, no Redis; the passes and dispatches run here (what the smoke
test does on SQLite).  ``--quick``: 300 workloads on 4 clusters of 40 nodes.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/gpubroker_bench"
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"
TENANTS = 4
SHAPES = (1, 1, 2, 4)  # GPUs of one-worker jobs: 2 on average
GPUS_PER_NODE = 8
DISPATCHED = ("queued", "running")


def write_fleet(path: Path, clusters: int, nodes: int) -> Path:
    """A fleet file of ``clusters`` simulated Kueue clusters of ``nodes`` x 8 A100-80GB.  Kueue,
    not Slurm: each worker process runs its own copy of the simulated fleet, and Slurm-style
    numeric job ids would repeat across two processes; Kueue's name their workload."""
    lines = ["description: placement benchmark fleet", "clusters:"]
    for c in range(clusters):
        lines += [
            f"  - name: bench-c{c:03d}",
            "    kind: simulator",
            "    flavor: kueue",
            "    region: eu-west",
            "    location: onprem",
            f"    price_per_gpu_hour: {1.0 + c / 100:.2f}",
            "    nodes:",
            f"      - {{count: {nodes}, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: {GPUS_PER_NODE},"
            f" name_prefix: c{c:03d}-n}}",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def bench_policy(work: Path) -> Path:
    """The default policy with a longer staleness limit: nothing reports during a run (the
    promised-GPUs selector counts what was sent), and a run may outlast the default 300 s."""
    from_file = ROOT / "broker" / "policy" / "default.yaml"
    text = from_file.read_text()
    if "staleness_limit_s: 300" not in text:
        raise RuntimeError(f"{from_file}: no 'staleness_limit_s: 300' to lengthen")
    path = work / "policy.yaml"
    path.write_text(text.replace("staleness_limit_s: 300", "staleness_limit_s: 7200"))
    return path


def setup_django(url: str, redis_url: str = "") -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["CELERY_BROKER_URL"] = redis_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["GPUBROKER_ENABLE_SIMULATOR"] = "true"
    if url.startswith(("postgres://", "postgresql://")):
        _ensure_postgres_database(url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _ensure_postgres_database(url: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def reset_database() -> None:
    """Every table emptied (PostgreSQL: one TRUNCATE), then the policy's GPU classes back."""
    from django.core.management import call_command

    call_command("flush", verbosity=0, interactive=False)


@dataclass
class Seeded:
    fleet_path: Path
    workload_ids: list[int]
    seconds: float


def seed(*, count: int, clusters: int, nodes: int, fleet_path: Path, seed_value: int = 13) -> Seeded:
    """The fleet, tenants, quotas and ``count`` submitted workloads (none placed yet)."""
    from broker.backends.sim import SimulatorFleet
    from broker.fleet_file import build_simulated_clusters, load_fleet
    from broker.models import Quota
    from broker.services.fleet.registration import clusters_from_fleet, gpu_classes_from_policy
    from broker.services.records.tasks_bridge import task_sink
    from broker.services.submitting.workloads import workload_submit
    from portal.tenancy.models import Role
    from portal.tenancy.services.tenants import member_ensure, project_ensure, tenant_ensure, user_ensure

    started = time.perf_counter()
    fleet = load_fleet(write_fleet(fleet_path, clusters, nodes))
    build_simulated_clusters(fleet, SimulatorFleet.reset())
    clusters_from_fleet(fleet=fleet)
    a100 = next(c for c in gpu_classes_from_policy() if c.slug == "a100-80gb")
    user = user_ensure(username="bench-researcher", password="bench-researcher")
    projects = []
    for t in range(TENANTS):
        tenant = tenant_ensure(slug=f"bench-t{t}", name=f"Bench tenant {t}")
        member_ensure(user=user, tenant=tenant, role=Role.RESEARCHER)
        projects.append(
            project_ensure(
                tenant=tenant,
                slug=f"bench-p{t}",
                name=f"Bench project {t}",
                slurm_account=f"bench{t}",
                k8s_namespace=f"bench-p{t}",
                cost_centre="",
            )
        )
        Quota.objects.update_or_create(tenant=tenant, gpu_class=a100, defaults={"limit_gpus": count * 8})
    rng = random.Random(seed_value)
    ids = []
    with task_sink(lambda *task: None):  # placement is the passes' job here, not each submission's
        for i in range(count):
            project = projects[i % len(projects)]
            workload = workload_submit(
                user=user,
                project_id=project.id,
                spec_data={
                    "name": f"bench-{i}",
                    "command": "python train.py",
                    "gpu_class": "a100-80gb",
                    "workers": 1,
                    "gpus_per_worker": rng.choice(SHAPES),
                    "time_limit_minutes": 60,
                },
            )
            ids.append(workload.id)
    return Seeded(fleet_path, ids, time.perf_counter() - started)


def sync_inventory() -> None:
    """One report per cluster, taken now (the fleet is idle: nothing was sent yet)."""
    from broker.models import Cluster
    from broker.services.fleet.inventory import cluster_sync_inventory

    for cluster_id in Cluster.objects.values_list("id", flat=True):
        cluster_sync_inventory(cluster_id=cluster_id)


def dispatched_count() -> int:
    from broker.models import Workload

    return Workload.objects.filter(state__in=DISPATCHED).count()


def states() -> dict[str, int]:
    from django.db.models import Count

    from broker.models import Workload

    return dict(Workload.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n"))


@dataclass
class PassQueries:
    total: int  # every query of one placing pass
    selects: int
    placed: int
    dispatch: int  # the queries of dispatching what it placed, chunk by chunk
    chunks: int


def pass_queries() -> PassQueries:
    """The queries of one pass run here, then those of the dispatch tasks it queued (run
    here too, on this process's simulated fleet)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from broker.services.placing import bursting
    from broker.services.dispatching.chunk import workloads_dispatch
    from broker.services.placing.cycle import waiting_place_pass
    from broker.services.records.tasks_bridge import task_sink

    bursting._cache.clear()  # each measured pass learns its waits afresh, as a fresh worker would
    chunks: list[list[int]] = []

    def queue(name: str, *args: object) -> None:
        if name == "dispatch_workloads":
            chunks.append(list(args[0]))  # type: ignore[call-overload]

    with task_sink(queue), CaptureQueriesContext(connection) as seen:
        report = waiting_place_pass()
    selects = sum(q["sql"].lstrip().upper().startswith("SELECT") for q in seen.captured_queries)
    with CaptureQueriesContext(connection) as sent:
        for ids in chunks:
            workloads_dispatch(workload_ids=ids)
    return PassQueries(len(seen), selects, report.placed, len(sent), len(chunks))


def run_in_process(expected: int, timeout_s: float) -> float:
    """The passes and their dispatches in this process (CELERY eager): seconds until done."""
    from broker import tasks

    started = time.perf_counter()
    while dispatched_count() < expected:
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError(f"{dispatched_count()} of {expected} dispatched after {timeout_s:.0f}s: {states()}")
        tasks.place_waiting()
    return time.perf_counter() - started


class Workers:
    """``n`` Celery worker processes (``--concurrency 1`` each), stopped on exit."""

    def __init__(self, n: int, *, db_url: str, redis_url: str, fleet_path: Path, log_dir: Path):
        self.n, self.log_dir = n, log_dir
        self.env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "CELERY_BROKER_URL": redis_url,
            "GPUBROKER_FLEET_FILE": str(fleet_path),
            "GPUBROKER_SIM_AUTOLOAD": "true",
            "GPUBROKER_ENABLE_SIMULATOR": "true",
            "GPUBROKER_LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
        }
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def __enter__(self) -> "Workers":
        for i in range(self.n):
            log = self.log_dir / f"worker{i}.log"
            self.logs.append(log)
            self.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "config",
                        "worker",
                        "-l",
                        "warning",
                        "--concurrency",
                        "1",
                        "-n",
                        f"bench{i}-{os.getpid()}@%h",
                        "--without-gossip",
                        "--without-mingle",
                        "--without-heartbeat",
                    ],
                    cwd=ROOT,
                    env=self.env,
                    stdout=log.open("w"),
                    stderr=subprocess.STDOUT,
                )
            )
        self._wait_ready(timeout_s=90)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        from celery import Celery

        app = Celery(broker=self.env["CELERY_BROKER_URL"])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for proc, log in zip(self.procs, self.logs, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(f"worker exited: {log.read_text()[-2000:]}")
            replies = app.control.ping(timeout=1.0) or []
            if len(replies) >= self.n:
                return
        raise RuntimeError(f"{self.n} workers not ready in {timeout_s:.0f}s")

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def tail(self) -> str:
        return "\n".join(log.read_text()[-1500:] for log in self.logs)


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def run_with_workers(n: int, *, expected: int, args, fleet_path: Path, log_dir: Path) -> float:
    """Seconds from the first pass queued until every workload is at its cluster."""
    from broker import tasks

    flush_redis(args.redis_url)
    with Workers(
        n, db_url=args.database_url, redis_url=args.redis_url, fleet_path=fleet_path, log_dir=log_dir
    ) as workers:
        sync_inventory()  # the reports placement reads are fresh when the clock starts
        started = time.perf_counter()
        tasks.place_waiting.delay()
        last, last_change = -1, started
        while (done := dispatched_count()) < expected:
            now = time.perf_counter()
            if done != last:
                last, last_change = done, now
            elif now - last_change > args.stall_s:  # nothing moved: a beat's pass, as in production
                tasks.place_waiting.delay()
                last_change = now
            if now - started > args.timeout_s:
                raise TimeoutError(f"{done} of {expected} after {args.timeout_s:.0f}s: {states()}\n{workers.tail()}")
            time.sleep(0.2)
        return time.perf_counter() - started


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} CPUs"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=160, help="nodes per cluster, 8 GPUs each")
    parser.add_argument("--workers", default="1,2", help="worker process counts to time, comma-separated")
    parser.add_argument("--query-count", type=int, default=500, help="workloads of the pass whose queries are counted")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 300 workloads, 4 clusters of 40 nodes")
    parser.add_argument("--in-process", action="store_true", help="no Celery: passes and dispatches run here")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL") or DEFAULT_URL)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS)
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--stall-s", type=float, default=10.0)
    args = parser.parse_args(argv)
    if args.quick:
        args.count, args.clusters, args.nodes, args.query_count = 300, 4, 40, 100
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-place-"))
    os.environ["GPUBROKER_POLICY_FILE"] = str(bench_policy(work))  # read by this process and the workers
    setup_django(args.database_url, "" if args.in_process else args.redis_url)
    from django.db import connection

    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}; fleet and logs in {work}")

    print(f"\nqueries of one pass over {args.query_count} waiting workloads, then of its dispatch tasks:")
    for clusters in (args.clusters, 2 * args.clusters):
        reset_database()
        seed(count=args.query_count, clusters=clusters, nodes=args.nodes, fleet_path=work / f"fleet-q{clusters}.yaml")
        sync_inventory()
        q = pass_queries()
        print(
            f"  {clusters:>4} clusters: {q.total} queries ({q.selects} SELECTs) for {q.placed} placed "
            f"= {q.total / max(q.placed, 1):.2f} per workload; their dispatch in {q.chunks} tasks: "
            f"{q.dispatch} queries = {q.dispatch / max(q.placed, 1):.2f} per workload"
        )

    rates: dict[str, float] = {}
    rounds = ["in-process"] if args.in_process else [w.strip() for w in args.workers.split(",") if w.strip()]
    for label in rounds:
        reset_database()
        seeded = seed(count=args.count, clusters=args.clusters, nodes=args.nodes, fleet_path=work / "fleet.yaml")
        print(
            f"\n{label} worker(s): {args.count:,} workloads submitted on {args.clusters} clusters x "
            f"{args.nodes} nodes in {seeded.seconds:.1f} s; {load()}"
        )
        if args.in_process:
            sync_inventory()
            seconds = run_in_process(args.count, args.timeout_s)
        else:
            seconds = run_with_workers(
                int(label), expected=args.count, args=args, fleet_path=seeded.fleet_path, log_dir=work
            )
        rates[label] = args.count / seconds
        print(f"  all {args.count:,} dispatched in {seconds:.1f} s: {rates[label]:.1f} workloads/s; {load()}")
    if "1" in rates and "2" in rates:
        print(
            f"\n2 workers / 1 worker: {rates['2'] / rates['1']:.2f}x  "
            f"(targets: >= 150 workloads/s with one, >= 1.3x with two)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
