"""A destination that outlives the broker's processes: simulated clusters kept in one
SQLite file, shared by every process that opens it.

The in-process simulator dies with the worker that holds it, so it cannot show what a
killed worker leaves behind at a destination.  The journal can: a worker killed right
after the destination accepted a job leaves the job in the file; the restarted broker
(another process) finds it there; the test (a third) counts the jobs per workload id.

The model is deliberately plain: nodes of N GPUs, first-fit packing of whole workers,
FIFO with skipping, each job running ``time_limit x fraction / time_scale`` wall
seconds.  Every call first catches the cluster up to the wall clock, inside one
``BEGIN IMMEDIATE`` transaction, so concurrent callers see one history.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from datetime import datetime, timezone
from typing import Iterator, Sequence

from broker.backends.base import (
    DestinationJob,
    InventorySnapshot,
    JobState,
    NodeInventory,
    PoolInventory,
    ProjectIdentity,
    QueueStats,
    Reason,
    Unavailable,
    UsageRecord,
)
from broker.spec import WorkloadSpec

SCHEMA = """
CREATE TABLE IF NOT EXISTS clusters (
    name TEXT PRIMARY KEY, nodes INTEGER, gpus_per_node INTEGER, gpu_model TEXT, memory_gb INTEGER,
    fraction REAL, time_scale REAL, unreachable INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT, workload_id TEXT, account TEXT,
    gpus_per_worker INTEGER, workers INTEGER, state TEXT, submitted REAL, started REAL, ended REAL,
    run_s REAL, placement TEXT DEFAULT '[]');
CREATE INDEX IF NOT EXISTS jobs_workload ON jobs (workload_id);
CREATE INDEX IF NOT EXISTS jobs_cluster_state ON jobs (cluster, state);
"""
LIVE = ("pending", "running")


def _at(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc)


class Journal:
    def __init__(self, path: str):
        self.path = str(path)
        con = sqlite3.connect(self.path, timeout=30)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(SCHEMA)
            con.commit()
        finally:
            con.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        con.row_factory = sqlite3.Row
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()

    # -- set-up and inspection (tests, the load bench) ----------------------------------
    def add_cluster(
        self,
        name: str,
        *,
        nodes: int = 2,
        gpus_per_node: int = 8,
        gpu_model: str = "A100",
        memory_gb: int = 80,
        fraction: float = 0.5,
        time_scale: float = 60.0,
    ) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO clusters (name, nodes, gpus_per_node, gpu_model, memory_gb, "
                "fraction, time_scale, unreachable) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                (name, nodes, gpus_per_node, gpu_model, memory_gb, fraction, time_scale),
            )

    def set_unreachable(self, name: str, unreachable: bool = True) -> None:
        with self._tx() as db:
            db.execute("UPDATE clusters SET unreachable = ? WHERE name = ?", (int(unreachable), name))

    def all_jobs(self) -> list[dict]:
        with self._tx() as db:
            for row in db.execute("SELECT name FROM clusters").fetchall():
                self._catch_up(db, self._cluster(db, row["name"]))
            return [self._row(r) for r in db.execute("SELECT * FROM jobs ORDER BY id").fetchall()]

    @staticmethod
    def _row(r: sqlite3.Row) -> dict:
        return {
            "cluster": r["cluster"],
            "job_id": f"j{r['id']}",
            "workload_id": r["workload_id"],
            "state": r["state"],
            "gpus": r["gpus_per_worker"] * r["workers"],
            "started": r["started"],
            "ended": r["ended"],
        }

    # -- the model -------------------------------------------------------------------------
    @staticmethod
    def _cluster(db: sqlite3.Connection, name: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM clusters WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise Unavailable(f"{name}: no such journal cluster")
        return row

    @staticmethod
    def _free(db: sqlite3.Connection, c: sqlite3.Row) -> list[int]:
        free = [c["gpus_per_node"]] * c["nodes"]
        for r in db.execute("SELECT placement FROM jobs WHERE cluster = ? AND state = 'running'", (c["name"],)):
            for node, gpus in json.loads(r["placement"]):
                free[node] -= gpus
        return free

    def _catch_up(self, db: sqlite3.Connection, c: sqlite3.Row) -> None:
        now = time.time()
        db.execute(
            "UPDATE jobs SET state = 'completed', ended = started + run_s "
            "WHERE cluster = ? AND state = 'running' AND started + run_s <= ?",
            (c["name"], now),
        )
        free = self._free(db, c)
        for job in db.execute(
            "SELECT * FROM jobs WHERE cluster = ? AND state = 'pending' ORDER BY id", (c["name"],)
        ).fetchall():
            placement, trial = [], list(free)
            for _ in range(job["workers"]):
                node = next((i for i, f in enumerate(trial) if f >= job["gpus_per_worker"]), None)
                if node is None:
                    break
                trial[node] -= job["gpus_per_worker"]
                placement.append((node, job["gpus_per_worker"]))
            if len(placement) == job["workers"]:
                free = trial
                db.execute(
                    "UPDATE jobs SET state = 'running', started = ?, placement = ? WHERE id = ?",
                    (now, json.dumps(placement), job["id"]),
                )

    def call(self, cluster: str, fn):
        with self._tx() as db:
            c = self._cluster(db, cluster)
            if c["unreachable"]:
                raise Unavailable(f"{cluster}: connection refused (journal cluster unreachable)")
            self._catch_up(db, c)
            return fn(db, c)


class JournalBackend:
    """The Backend protocol over one journal cluster."""

    kind = "simulator"

    def __init__(self, cluster: str, path: str):
        self.cluster = cluster
        self.journal = Journal(path)

    def _view(self, c: sqlite3.Row, r: sqlite3.Row) -> DestinationJob:
        state = JobState(r["state"]) if r["state"] in {s.value for s in JobState} else JobState.UNKNOWN
        nodes = tuple(dict.fromkeys(f"{c['name']}-n{n}" for n, _ in json.loads(r["placement"])))
        return DestinationJob(
            job_id=f"j{r['id']}",
            workload_id=r["workload_id"],
            state=state,
            reason=Reason.CAPACITY if state is JobState.PENDING else Reason.NONE,
            raw_reason="Resources" if state is JobState.PENDING else "",
            gpus=r["gpus_per_worker"] * r["workers"],
            nodes=nodes,
            started_at=_at(r["started"]),
            ended_at=_at(r["ended"]),
        )

    def inventory(self) -> InventorySnapshot:
        def fn(db, c):
            free = Journal._free(db, c)
            nodes = tuple(
                NodeInventory(
                    name=f"{c['name']}-n{i}",
                    gpu_model=c["gpu_model"],
                    gpu_memory_gb=c["memory_gb"],
                    gpus_total=c["gpus_per_node"],
                    gpus_allocatable=c["gpus_per_node"],
                    gpus_allocated=c["gpus_per_node"] - f,
                    owner="slurm",
                )
                for i, f in enumerate(free)
            )
            pending = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(gpus_per_worker * workers), 0) FROM jobs "
                "WHERE cluster = ? AND state = 'pending'",
                (c["name"],),
            ).fetchone()
            pool = PoolInventory(
                name="gpu",
                gpu_model=c["gpu_model"],
                gpu_memory_gb=c["memory_gb"],
                partitioning="whole",
                owner="slurm",
                nodes=nodes,
            )
            return InventorySnapshot(
                cluster=c["name"],
                taken_at=datetime.now(timezone.utc),
                pools=(pool,),
                queue=QueueStats(pending_jobs=pending[0], pending_gpus=pending[1]),
            )

        return self.journal.call(self.cluster, fn)

    def submit(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> str:
        def fn(db, c):
            run_s = spec.time_limit_minutes * 60 * c["fraction"] / c["time_scale"]
            cur = db.execute(
                "INSERT INTO jobs (cluster, workload_id, account, gpus_per_worker, workers, state, "
                "submitted, run_s) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
                (
                    c["name"],
                    workload_id,
                    identity.slurm_account or identity.project,
                    spec.gpus_per_worker,
                    spec.workers,
                    time.time(),
                    run_s,
                ),
            )
            self.journal._catch_up(db, c)
            return f"j{cur.lastrowid}"

        return self.journal.call(self.cluster, fn)

    def find(self, workload_id: str) -> DestinationJob | None:
        def fn(db, c):
            rows = db.execute(
                "SELECT * FROM jobs WHERE cluster = ? AND workload_id = ? ORDER BY "
                "state IN ('pending', 'running') DESC, id DESC",
                (c["name"], workload_id),
            ).fetchall()
            return self._view(c, rows[0]) if rows else None

        return self.journal.call(self.cluster, fn)

    def status(self, job_ids: Sequence[str]) -> dict[str, DestinationJob]:
        ids = [int(j[1:]) for j in job_ids if j.startswith("j") and j[1:].isdigit()]

        def fn(db, c):
            if not ids:
                return {}
            marks = ",".join("?" * len(ids))
            rows = db.execute(f"SELECT * FROM jobs WHERE cluster = ? AND id IN ({marks})", (c["name"], *ids))
            return {f"j{r['id']}": self._view(c, r) for r in rows.fetchall()}

        return self.journal.call(self.cluster, fn)

    def active_jobs(self) -> list[DestinationJob]:
        def fn(db, c):
            rows = db.execute(
                "SELECT * FROM jobs WHERE cluster = ? AND state IN ('pending', 'running')", (c["name"],)
            ).fetchall()
            return [self._view(c, r) for r in rows]

        return self.journal.call(self.cluster, fn)

    def cancel(self, job_id: str) -> bool:
        def fn(db, c):
            if not (job_id.startswith("j") and job_id[1:].isdigit()):
                return False
            row = db.execute("SELECT * FROM jobs WHERE cluster = ? AND id = ?", (c["name"], int(job_id[1:]))).fetchone()
            if row is None:
                return False
            if row["state"] in LIVE:
                db.execute("UPDATE jobs SET state = 'cancelled', ended = ? WHERE id = ?", (time.time(), row["id"]))
            return True

        return self.journal.call(self.cluster, fn)

    def usage(self, since: datetime) -> Iterator[UsageRecord]:
        def fn(db, c):
            rows = db.execute(
                "SELECT * FROM jobs WHERE cluster = ? AND started IS NOT NULL AND (ended IS NULL OR ended >= ?)",
                (c["name"], since.timestamp()),
            ).fetchall()
            out = []
            for r in rows:
                end = r["ended"] if r["ended"] is not None else time.time()
                gpus = r["gpus_per_worker"] * r["workers"]
                out.append(
                    UsageRecord(
                        source="simulator",
                        cluster=c["name"],
                        job_id=f"j{r['id']}",
                        workload_id=r["workload_id"],
                        account=r["account"],
                        gpu_model=c["gpu_model"],
                        gpus=gpus,
                        start=_at(r["started"]),
                        end=_at(r["ended"]),
                        gpu_seconds=int(gpus * (end - r["started"])),
                        state=r["state"],
                    )
                )
            return out

        return iter(self.journal.call(self.cluster, fn))


def journal_builder(path: str):
    """A backend-registry builder: simulator clusters become journal clusters."""
    return lambda cluster: JournalBackend(cluster.name, path)
