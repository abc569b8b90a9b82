"""The broker's own upgrade and rollback, as docs/upgrading.md tells a site to do them, on
PostgreSQL with real Celery workers on Redis (marker `upgrade`; CI's main run).

A database made by the previous release (CHANGELOG.md's newest release, checked out of git
history) with workloads in every lifecycle state, reservations, dispatch attempts, escalations,
usage and an imported bill; the new release migrates it while a worker and beat of the previous
release keep working, the previous release's code then writes the rows it writes (a cluster, a
submission, an attempt, an escalation, usage), the new release's worker and beat run, and
nothing may be lost, changed in the ledger, duplicated at a destination or stranded, with
last month's chargeback identical (tests/upgrade/checks.py). The rollback goes back to the
previous release by reverse migrations, and from the backup taken first, with the same checks.
A deliberately breaking migration must make the same procedure fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
import redis
from psycopg import sql

from tests.upgrade import checks
from tests.upgrade.release import Release, checkout, copy_of_this_tree, previous_release, with_database

pytestmark = [pytest.mark.upgrade]

SCRIPTS = Path(__file__).parent / "scripts"
# a Redis database of its own: the main run's Celery worker listens on CELERY_BROKER_URL's
REDIS_DB = int(os.environ.get("GPUBROKER_UPGRADE_REDIS_DB", "8"))
BREAKING = '''from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("broker", "{last}")]
    # NOT NULL without a database default: every insert of a release that does not know the
    # column fails (what expand-then-contract forbids)
    operations = [migrations.AddField(model_name="workload", name="upgrade_selftest",
                                      field=models.CharField(max_length=8, default="x"), preserve_default=False)]
'''


def _server_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.skip("the upgrade test needs PostgreSQL: set DATABASE_URL=postgres://...")
    return url


def _admin(url: str, statement: sql.Composable) -> None:
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(statement)


class Databases:
    """Fresh databases on DATABASE_URL's server, each dropped when the test ends."""

    def __init__(self, server: str):
        self.server, self.names = server, []
        self.prefix = f"gpubroker_upgrade_{os.getpid()}_{time.monotonic_ns() % 100000}"

    def new(self, purpose: str) -> str:
        name = f"{self.prefix}_{purpose}"
        _admin(self.server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.names.append(name)
        return with_database(self.server, name)

    def drop(self) -> None:
        for name in self.names:
            _admin(self.server, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def database():
    databases = Databases(_server_url())
    # tasks an earlier test's workers left in the queue name rows of another database
    redis.Redis.from_url(_broker_url()).flushdb()
    try:
        yield databases
    finally:
        databases.drop()


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    _server_url()
    _version, commit = previous_release()
    base = tmp_path_factory.mktemp("releases")
    return checkout(commit, base / "previous"), copy_of_this_tree(base / "new")


def _broker_url() -> str:
    return with_database(os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"), REDIS_DB)


def _wait_for_tasks(release: Release, logs: Path, more_than: int, timeout: float = 90) -> int:
    """Until this release's worker has finished more than ``more_than`` tasks; how many it has."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = release.task_lines(logs)
        if done > more_than:
            return done
        time.sleep(1)
    raise AssertionError(f"the {release.name} release's worker finished no task in {timeout:.0f} s:\n"
                         + (logs / f"worker-{release.name}.log").read_text()[-3000:])


def _applied(url: str) -> dict[str, str]:
    """The newest applied migration of each app."""
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT app, max(name) FROM django_migrations GROUP BY app").fetchall())


def _stop_drained(release: Release) -> None:
    """docs/upgrading.md's order: beat first, then the workers once they have taken and
    finished every queued task, so none is left for a release that may not have it."""
    release.stop(only="beat")
    queue = redis.Redis.from_url(_broker_url())
    deadline = time.monotonic() + 60
    # kombu's Redis transport: the queue is the list "celery"; taken, unacknowledged
    # messages (acks_late) wait in the hash "unacked" and go back to the queue on shutdown
    while (queue.llen("celery") or queue.hlen("unacked")) and time.monotonic() < deadline:
        time.sleep(0.5)
    release.stop()


def _upgrade(previous: Path, new: Path, url: str, logs: Path, backup: Path | None = None) -> dict:
    """docs/upgrading.md's steps with a live previous release; what the checks need. With
    ``backup``, the backup the procedure takes first (pg_dump -Fc) is written there."""
    old_release = Release("previous", previous, url, _broker_url())
    new_release = Release("new", new, url, _broker_url())
    old_release.manage("migrate", "--no-input")
    month = json.loads(old_release.script(SCRIPTS / "seed.py", "UPGRADE_SEEDED"))["month"][:8] + "01"
    before = json.loads(old_release.script(SCRIPTS / "snapshot.py", "UPGRADE_SNAPSHOT"))
    applied_before = _applied(url)
    if backup is not None:
        subprocess.run(["pg_dump", "-Fc", "-f", str(backup), url], check=True, timeout=300)
    try:
        old_release.start("worker", logs)
        old_release.start("beat", logs)
        done = _wait_for_tasks(old_release, logs, 2)
        migrated = new_release.manage("migrate", "--no-input", check=False)  # the previous release still working
        refused = json.loads(old_release.script(SCRIPTS / "old_writes.py", "UPGRADE_OLD_WRITES"))
        _wait_for_tasks(old_release, logs, done + 2)  # and it goes on working on the migrated schema
    finally:
        old_release.stop()
    errors = [f"previous: {x}" for x in old_release.task_lines(logs)[1]]
    after = before  # a failed migration is reported as an error; the new release never starts
    if migrated.returncode != 0:
        errors.append(f"migrate failed: {migrated.stderr[-500:]}")
    else:
        try:
            new_release.start("worker", logs)
            new_release.start("beat", logs)
            _wait_for_tasks(new_release, logs, 2)
        finally:
            _stop_drained(new_release)
        errors += [f"new: {x}" for x in new_release.task_lines(logs)[1]]
        after = json.loads(new_release.script(SCRIPTS / "snapshot.py", "UPGRADE_SNAPSHOT"))
    found = checks.problems(before, after, month=month, refused_writes=refused, worker_errors=errors)
    return {"before": before, "after": after, "month": month, "found": found, "applied_before": applied_before,
            "old": old_release, "new": new_release}


def test_an_upgrade_with_the_previous_release_still_working_loses_and_duplicates_nothing(trees, database, tmp_path):
    previous, new = trees
    outcome = _upgrade(previous, new, database.new("site"), tmp_path)
    assert outcome["found"] == {}, checks.table(outcome["found"])
    # the checks had something to check: every lifecycle state, the ledger and the bill
    before, after = outcome["before"], outcome["after"]
    states = {row[1] for row in before["workloads"].values()}
    assert {"submitted", "waiting", "reserved", "dispatching", "queued", "running", "cancelling", "completed",
            "failed", "cancelled", "rejected"} <= states
    assert before["usage"] and before["bill_lines"] and before["escalations"]
    assert before["chargeback"][outcome["month"]]["rows"], "last month's chargeback has rows to compare"
    assert len(after["clusters"]) == len(before["clusters"]) + 1  # the previous release registered one meanwhile


def test_a_migration_that_refuses_the_previous_releases_writes_fails_the_upgrade(trees, database, tmp_path):
    """The self-test: the same procedure with one breaking migration added must report it."""
    previous, new = trees
    url = database.new("site")
    broken = tmp_path / "broken"
    shutil.copytree(new, broken)
    last = max(p.stem for p in (broken / "broker" / "migrations").glob("0*.py"))
    (broken / "broker" / "migrations" / "9999_upgrade_selftest.py").write_text(BREAKING.format(last=last))
    logs = tmp_path / "logs"
    logs.mkdir()
    found = _upgrade(previous, broken, url, logs)["found"]
    assert "previous_release_writes_refused" in found, checks.table(found)
    assert any(x.startswith("workload:") and "upgrade_selftest" in x for x in found["previous_release_writes_refused"])


def test_a_rollback_by_reverse_migrations_and_from_the_backup_gets_the_previous_release_back(trees, database, tmp_path):
    previous, new = trees
    url = database.new("site")
    backup = tmp_path / "before-upgrade.dump"
    outcome = _upgrade(previous, new, url, tmp_path, backup=backup)
    assert outcome["found"] == {}, checks.table(outcome["found"])
    old_release, new_release = outcome["old"], outcome["new"]
    # reverse migrations, run by the NEW release (it has them): each app back to the previous
    # release's newest migration, apps the previous release did not have to zero
    targets = outcome["applied_before"]
    for app in sorted(set(_applied(url)) - set(targets)):
        new_release.manage("migrate", app, "zero", "--no-input")
    for app, name in sorted(targets.items()):
        new_release.manage("migrate", app, name, "--no-input")
    assert _applied(url) == targets
    try:
        old_release.start("worker", tmp_path)
        old_release.start("beat", tmp_path)
        _wait_for_tasks(old_release, tmp_path, old_release.task_lines(tmp_path)[0] + 2)
    finally:
        old_release.stop()
    refused = json.loads(old_release.script(SCRIPTS / "old_writes.py", "UPGRADE_OLD_WRITES", UPGRADE_WRITE_SUFFIX="2"))
    back = json.loads(old_release.script(SCRIPTS / "snapshot.py", "UPGRADE_SNAPSHOT"))
    found = checks.problems(outcome["after"], back, month=outcome["month"], refused_writes=refused,
                            worker_errors=old_release.task_lines(tmp_path)[1])
    assert found == {}, checks.table(found)
    # the other way back: the backup taken before the upgrade, restored into a new database,
    # reads with the previous release exactly as the database did before the upgrade
    restored = _restore(database, backup)
    again = json.loads(Release("previous", old_release.path, restored, _broker_url())
                       .script(SCRIPTS / "snapshot.py", "UPGRADE_SNAPSHOT"))
    assert again == outcome["before"]


def _restore(databases: Databases, backup: Path) -> str:
    """docs/upgrading.md's restore: pg_restore of the backup into a new, empty database."""
    restored = databases.new("restored")
    subprocess.run(["pg_restore", "--no-owner", "-d", restored, str(backup)], check=True, timeout=300)
    return restored
