"""Benchmark: a million ``sacct -P`` lines through the streaming parser into the usage ledger.

    .venv/bin/python bench/bench_sacct_ingest.py                 # 1,000,000 lines, fresh SQLite
    .venv/bin/python bench/bench_sacct_ingest.py -n 200000 --again
    DATABASE_URL=postgres://... .venv/bin/python bench/bench_sacct_ingest.py --keep-db

Lines are generated one at a time and streamed to a scratch file (never held in memory),
then read back line by line, as they would come from sacct's pipe, through the parser
into the ledger, which writes in chunks of GPUBROKER_ACCOUNTING_CHUNK (5000).
Only the read-parse-ingest part is timed.  Targets: under 60 s and under 500 MB peak RSS.
Peak memory is the process's maximum resident set size (getrusage), which includes
Python and Django themselves; --tracemalloc adds Python-heap peak (and slows the run).
"""
from __future__ import annotations

import argparse
import atexit
import os
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = 50
HEADER = "JobID|JobName|Account|Partition|State|Start|End|ElapsedRaw|AllocTRES|Comment|WCKey|ExitCode"


def setup_django(keep_db: bool) -> str:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if not os.environ.get("DATABASE_URL") and not keep_db:
        folder = tempfile.mkdtemp(prefix="bench-sacct-")
        atexit.register(shutil.rmtree, folder, True)  # a million-row scratch DB is not worth keeping
        os.environ["DATABASE_URL"] = f"sqlite:///{Path(folder) / 'bench.sqlite3'}"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return os.environ.get("DATABASE_URL", "sqlite (project default)")


class _NoFile:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> None:
        return None


class Expected:
    """What the generated lines add up to, counted while they stream past."""

    jobs = 0
    gpu_seconds = 0


def sacct_lines(n: int, expected: Expected) -> Iterator[str]:
    """``sacct -P -X`` lines: 1-3 nodes x 1-8 GPUs, a few CPU-only jobs, some unknown accounts."""
    yield HEADER
    base = datetime(2026, 11, 1, tzinfo=timezone.utc)
    for i in range(n):
        nodes, per_node = 1 + i % 3, 1 + (i * 7) % 8
        gpus = 0 if i % 50 == 0 else nodes * per_node
        elapsed = 60 + (i * 37) % 86_400
        start = base + timedelta(seconds=i * 2)
        end = start + timedelta(seconds=elapsed)
        account = "unknown-acct" if i % 100 == 7 else f"acct{i % PROJECTS}"
        tres = f"billing={nodes},cpu={nodes * 4},mem={nodes}G,node={nodes}"
        if gpus:
            tres = f"billing={nodes},cpu={nodes * 4},gres/gpu:a100={gpus},gres/gpu={gpus},mem={nodes}G,node={nodes}"
            expected.jobs += 1
            expected.gpu_seconds += gpus * elapsed
        comment = f"wl-{i:016x}" if i % 4 == 0 else ""
        yield (f"{1_000_000 + i}|job-{i}|{account}|gpu|COMPLETED|{start:%Y-%m-%dT%H:%M:%S}|"
               f"{end:%Y-%m-%dT%H:%M:%S}|{elapsed}|{tres}|{comment}||0:0")


def fixtures():
    from broker.models import Cluster, GpuClass
    from portal.tenancy.models import Project, Tenant

    tenant, _ = Tenant.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    for p in range(PROJECTS):
        Project.objects.get_or_create(tenant=tenant, slug=f"p{p}",
                                      defaults={"name": f"P{p}", "slurm_account": f"acct{p}"})
    GpuClass.objects.get_or_create(slug="a100-80gb", defaults={"name": "A100", "gpu_models": ["A100 80GB"]})
    cluster, _ = Cluster.objects.get_or_create(name="bench-hpc", defaults={
        "kind": "slurm", "region": "local", "location": "onprem"})
    return cluster


def parser_for(name: str):
    """broker: the Slurm backend's own sacct parser and usage() mapping (production path);
    accounting: the small stand-alone parser in accounting/sacct.py."""
    from accounting.sacct import iter_sacct_usage, sacct_usage

    return iter_sacct_usage if name == "accounting" else sacct_usage


def write_lines(n: int, folder: str) -> tuple[Path, Expected, float]:
    """Stream the generated lines to a file first: in production they come from sacct's pipe,
    so making them up is not part of what is measured."""
    expected = Expected()
    path = Path(folder) / "sacct.txt"
    t0 = time.perf_counter()
    with path.open("w") as f:
        for line in sacct_lines(n, expected):
            f.write(line + "\n")
    return path, expected, time.perf_counter() - t0


def run_once(n: int, cluster, parser: str = "broker", path: Path | None = None) -> tuple[float, object, Expected]:
    from accounting.services.usage import usage_ingest

    expected = Expected()
    with (path.open() if path else _NoFile()) as f:
        lines = f if path else sacct_lines(n, expected)
        records = parser_for(parser)(lines, cluster=cluster.name)
        t0, c0 = time.perf_counter(), time.process_time()
        report = usage_ingest(cluster=cluster, records=records)
    # CPU time too: on a shared machine the wall clock measures the neighbours as well
    report.cpu_seconds = time.process_time() - c0
    return time.perf_counter() - t0, report, expected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--lines", type=int, default=1_000_000)
    parser.add_argument("--again", action="store_true", help="ingest the same lines a second time (adds nothing)")
    parser.add_argument("--keep-db", action="store_true", help="use DATABASE_URL / the project DB, not a temp SQLite")
    parser.add_argument("--parser", choices=("broker", "accounting"), default="broker",
                        help="sacct parser: the Slurm backend's (default) or accounting's own")
    parser.add_argument("--tracemalloc", action="store_true", help="also report the Python heap peak (slower)")
    args = parser.parse_args()
    db = setup_django(args.keep_db)
    if args.tracemalloc:
        tracemalloc.start()
    cluster = fixtures()
    print(f"parser          {args.parser}")
    folder = tempfile.mkdtemp(prefix="bench-sacct-lines-")
    atexit.register(shutil.rmtree, folder, True)
    path, expected, gen_s = write_lines(args.lines, folder)
    print(f"generated       {args.lines:,} lines to {path} in {gen_s:.1f} s (not counted below)")
    seconds, report, _ = run_once(args.lines, cluster, args.parser, path)
    _print("first pass", args.lines, seconds, report)
    ok = _verify(cluster, expected)
    if args.again:
        seconds2, report2, _ = run_once(args.lines, cluster, args.parser, path)
        _print("second pass", args.lines, seconds2, report2)
        ok = ok and report2.created == 0 and _verify(cluster, expected)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"database        {db}")
    print(f"peak RSS        {peak_mb:.0f} MB (target < 500 MB)")
    if args.tracemalloc:
        print(f"peak heap       {tracemalloc.get_traced_memory()[1] / 2**20:.0f} MB (tracemalloc)")
    print(f"verdict         {'OK' if ok and seconds < 60 and peak_mb < 500 else 'MISSED TARGET'}")
    return 0 if ok else 1


def _print(label: str, n: int, seconds: float, report) -> None:
    print(f"{label:<15} {n:,} lines, {report.records:,} GPU jobs in {seconds:.1f} s = "
          f"{report.records / seconds:,.0f} records/s, {n / seconds:,.0f} lines/s "
          f"(CPU {report.cpu_seconds:.1f} s; created {report.created:,}, unchanged {report.unchanged:,}, "
          f"unmatched accounts {sum(report.unmatched_accounts.values()):,})")


def _verify(cluster, expected: Expected) -> bool:
    from django.db.models import Count, Sum

    from accounting.models import UsageEntry

    got = UsageEntry.objects.filter(cluster=cluster).aggregate(n=Count("id"), s=Sum("gpu_seconds"))
    same = got["n"] == expected.jobs and got["s"] == expected.gpu_seconds
    print(f"ledger check    {got['n']:,} jobs, {got['s']:,} GPU-s: {'matches' if same else 'DIFFERS from'} the input")
    return same


if __name__ == "__main__":
    sys.exit(main())
