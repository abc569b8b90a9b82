"""The broker's releases as source trees of their own, for the upgrade and rollback tests.

The previous release is checked out of this repository's history (the commit its CHANGELOG.md
entry names); the new one is a copy of this checkout. Each runs with this checkout's virtual
environment (the dependencies did not change between them) against one PostgreSQL database and
a Redis database of its own, as separate processes: `manage.py` commands, a Celery worker and
its beat. Only test tooling uses this; the product knows nothing of it."""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
# "## 0.1.0 (tag `v0.1.0`, commit 76c9d37, 2026-12-02)": the newest released section
RELEASE_HEADING = re.compile(r"^## (\d+\.\d+\.\d+) \(tag `(v[\d.]+)`, commit ([0-9a-f]{7,40})", re.M)
# what the new tree's copy leaves out: history, environments, outputs, documentation
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "test-artifacts", "docs", "__pycache__", "*.pyc",
                                     "node_modules", "shared", "*.sqlite3")
# fast passes, so that a worker of either release does real work within the test's seconds
INTERVALS = {"GPUBROKER_INVENTORY_INTERVAL_S": "2", "GPUBROKER_STATUS_INTERVAL_S": "2",
             "GPUBROKER_RECONCILE_INTERVAL_S": "3", "GPUBROKER_USAGE_INTERVAL_S": "5",
             "GPUBROKER_SAMPLE_INTERVAL_S": "5"}


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str | None = None,
        timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} exited {done.returncode}:\n"
                           f"{done.stdout[-1500:]}\n{done.stderr[-3000:]}")
    return done


def previous_release() -> tuple[str, str]:
    """(version, commit) of the newest release CHANGELOG.md lists. Its tag names the same
    commit where the tag was fetched; the commit is what a clone of main always has."""
    found = RELEASE_HEADING.search((ROOT / "CHANGELOG.md").read_text())
    if found is None:
        raise AssertionError("CHANGELOG.md names no release: a heading '## X.Y.Z (tag `vX.Y.Z`, commit ...)'")
    version, tag, commit = found.groups()
    tagged = run(["git", "-C", str(ROOT), "rev-parse", "--verify", "-q", f"{tag}^{{commit}}"],
                 check=False).stdout.strip()
    if tagged and not tagged.startswith(commit):
        raise AssertionError(f"tag {tag} is {tagged[:12]}, CHANGELOG.md says {commit}")
    return version, commit


def checkout(commit: str, dest: Path) -> Path:
    """The tree of ``commit`` at ``dest`` (git archive: no work tree of this repository moves)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                             capture_output=True, timeout=120)
    if archive.returncode != 0:
        raise AssertionError(f"git archive {commit}: {archive.stderr.decode()[-500:]} "
                             "(the upgrade test needs the repository's history: a full clone)")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def copy_of_this_tree(dest: Path) -> Path:
    shutil.copytree(ROOT, dest, ignore=COPY_IGNORE)
    return dest


def with_database(url: str, name: str | int) -> str:
    """``url`` naming another database: a PostgreSQL database's name, a Redis db's number."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@dataclass
class Release:
    """One release's tree, run as processes against ``database_url`` and ``broker_url``."""

    name: str
    path: Path
    database_url: str
    broker_url: str
    processes: list[tuple[str, subprocess.Popen, Path]] = field(default_factory=list)

    @property
    def settings_module(self) -> str:
        # 0.1.0 kept its settings in the portal package; later releases in config/
        return "config.settings" if (self.path / "config" / "settings.py").exists() else "portal.settings"

    @property
    def celery_app(self) -> str:
        return self.settings_module.split(".")[0]

    def environ(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBROKER_", "DJANGO_", "CELERY_"))}
        env.update(PYTHONPATH=str(self.path), DJANGO_SETTINGS_MODULE=self.settings_module,
                   DATABASE_URL=self.database_url, CELERY_BROKER_URL=self.broker_url,
                   GPUBROKER_ENABLE_SIMULATOR="false", GPUBROKER_SIM_AUTOLOAD="false", **INTERVALS)
        env.update(extra)
        return env

    def manage(self, *args: str, stdin: str | None = None, timeout: float = 300, check: bool = True,
               **extra: str) -> subprocess.CompletedProcess:
        return run([sys.executable, "manage.py", *args], cwd=self.path, env=self.environ(**extra), stdin=stdin,
                   timeout=timeout, check=check)

    def script(self, path: Path, marker: str, **extra: str) -> str:
        """Runs ``path`` in `manage.py shell`; the line it printed after ``marker``."""
        out = self.manage("shell", stdin=path.read_text(), **extra).stdout
        line = next((x for x in out.splitlines() if x.startswith(marker + " ")), None)
        if line is None:
            raise AssertionError(f"{self.name}: {path.name} printed no {marker} line:\n{out[-2000:]}")
        return line.split(" ", 1)[1]

    def start(self, what: str, log_dir: Path) -> None:
        """A Celery worker or beat of this release, its output in ``log_dir``."""
        argv = {"worker": ["worker", "-l", "info", "--pool", "threads", "--concurrency", "2",
                           "--without-gossip", "--without-mingle", "-n", f"{self.name}@%h"],
                "beat": ["beat", "-l", "info", "--schedule", str(log_dir / f"beat-{self.name}.db")]}[what]
        log = log_dir / f"{what}-{self.name}.log"
        with open(log, "a") as out:
            proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", self.celery_app, *argv], cwd=self.path,
                                    env=self.environ(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append((what, proc, log))

    def stop(self, only: str | None = None) -> None:
        """Warm shutdown (TERM: the tasks under way finish), then KILL after 30 s; ``only``:
        just this release's "worker" or "beat"."""
        stopping = [p for p in self.processes if only is None or p[0] == only]
        for _, proc, _ in stopping:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for _, proc, _ in stopping:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.processes = [p for p in self.processes if p not in stopping]

    def task_lines(self, log_dir: Path) -> tuple[int, list[str]]:
        """(tasks taken, error lines) in this release's worker log: the portal logs a task's
        receipt and its failure, not its success (celery.app.trace at WARNING); a warm
        shutdown (stop) waits for the tasks taken to finish."""
        text = (log_dir / f"worker-{self.name}.log").read_text(errors="replace")
        errors = [x for x in text.splitlines() if ("ERROR" in x or "Traceback" in x) and "gossip" not in x]
        return text.count("] received"), errors
