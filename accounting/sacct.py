"""``sacct -P -X`` text -> UsageRecords, streamed: one line at a time, nothing held.

``sacct_usage`` is the entry point: it runs the lines through the Slurm backend's own
parser and its usage() mapping (broker/backends/slurm), so a file and a live cluster
give the same records.  ``iter_sacct_usage`` is a small stand-alone parser kept as the
fallback where that backend is not installed, and as a cross-check in the tests.
GPU-seconds = AllocTRES ``gres/gpu`` (the total over every node of the job) x ElapsedRaw,
as Slurm's own accounting counts them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import Iterable, Iterator, Sequence

from broker.backends.base import WORKLOAD_ID_PREFIX, UsageRecord
from broker.backends.slurm.backend import SlurmBackend
from broker.backends.slurm.parsers import iter_sacct

log = logging.getLogger(__name__)

SACCT_FIELDS = (
    "JobID",
    "JobName",
    "Account",
    "Partition",
    "State",
    "Start",
    "End",
    "ElapsedRaw",
    "AllocTRES",
    "Comment",
    "WCKey",
    "ExitCode",
    "User",
)
SACCT_FORMAT = ",".join(SACCT_FIELDS)
_NO_TIME = {"", "None", "Unknown"}
_WORKLOAD_RE = re.compile(re.escape(WORKLOAD_ID_PREFIX) + r"[A-Za-z0-9]+")


def sacct_usage(lines: Iterable[str], *, cluster: str) -> Iterator[UsageRecord]:
    """Records from ``sacct -P`` lines (header first) through the Slurm backend's own parser."""
    transport = _LinesTransport(lines)  # only accounting() is called on it
    return SlurmBackend(cluster, transport).usage(  # type: ignore[arg-type]
        since=datetime.min.replace(tzinfo=timezone.utc)
    )


class _LinesTransport:
    """Just enough of the Slurm backend's Transport to read accounting from text."""

    name = "lines"

    def __init__(self, lines: Iterable[str]):
        self.lines = lines

    def accounting(self, *, since=None, job_ids=None, names=None, every_run=False):
        # every_run: the file holds what sacct printed (with --duplicates, every run)
        it = iter(self.lines)
        fields = tuple(next(it, "").rstrip("\r\n").split("|"))
        return iter_sacct(it, fields, "|")


@dataclass(frozen=True)
class SacctProblem:
    """A line of a usage file that was skipped, and the field that could not be read."""

    line: int
    field: str
    value: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field} {self.value[:60]!r} is not readable"


class _Unreadable(ValueError):
    def __init__(self, field: str, value: str):
        super().__init__(field)
        self.field, self.value = field, value


def iter_sacct_usage(
    lines: Iterable[str],
    *,
    cluster: str,
    fields: Sequence[str] | None = None,
    tz: tzinfo = timezone.utc,
    problems: list[SacctProblem] | None = None,
) -> Iterator[UsageRecord]:
    """Yield GPU jobs from ``sacct -P`` lines; the first line is the header unless ``fields``.

    A line with an unreadable field is skipped, not the file: it goes to ``problems`` (and
    the log) with its line number, and the lines after it are still read."""
    it = iter(lines)
    first_line = 1
    if fields is None:
        header = next(it, "")
        fields, first_line = header.rstrip("\r\n").split("|"), 2
    idx = {name: i for i, name in enumerate(fields)}
    missing = [f for f in ("JobID", "Start", "AllocTRES") if f not in idx]
    if missing:
        raise ValueError(f"sacct output lacks {', '.join(missing)}")
    skipped = 0
    for number, line in enumerate(it, start=first_line):
        try:
            record = _record(line.rstrip("\r\n").split("|"), idx, cluster, tz)
        except _Unreadable as exc:
            skipped += 1
            _note(SacctProblem(number, exc.field, exc.value), skipped, problems)
            continue
        if record is not None:
            yield record
    if skipped > _LOGGED_PROBLEMS:
        log.warning("sacct usage of %s: %d lines skipped in all", cluster, skipped)


_LOGGED_PROBLEMS = 20  # a broken file is not logged line by line


def _note(problem: SacctProblem, skipped: int, problems: list[SacctProblem] | None) -> None:
    if problems is not None:
        problems.append(problem)
    if skipped <= _LOGGED_PROBLEMS:
        log.warning("sacct usage: %s; line skipped", problem)


def _record(cols: list[str], idx: dict[str, int], cluster: str, tz: tzinfo) -> UsageRecord | None:
    def col(name: str) -> str:
        i = idx.get(name)
        return cols[i] if i is not None and i < len(cols) else ""

    job_id = col("JobID")
    if not job_id or "." in job_id:  # job steps repeat their job's allocation
        return None
    gpus, gpu_model = parse_gpu_tres(col("AllocTRES"))
    start = _time("Start", col("Start"), tz)
    if gpus == 0 or start is None:
        return None
    end = _time("End", col("End"), tz)
    elapsed = col("ElapsedRaw")
    seconds = int(elapsed) if _is_count(elapsed) else int(((end or start) - start).total_seconds())
    state = col("State").split(" ", 1)[0]
    if state in ("RUNNING", "PENDING", "REQUEUED", "SUSPENDED"):
        end = None  # its End is only a guess until the job ends
    return UsageRecord(
        source="slurm",
        cluster=cluster,
        job_id=job_id,
        workload_id=_workload_id(cols, idx),
        account=col("Account"),
        gpu_model=gpu_model,
        gpus=gpus,
        start=start,
        end=end,
        gpu_seconds=gpus * max(0, seconds),
        state=state,
        user=col("User"),
    )


def parse_gpu_tres(tres: str) -> tuple[int, str]:
    """``...,gres/gpu:a100=2,gres/gpu=2,...`` -> (2, "a100"); no GPU -> (0, "")."""
    if "gres/gpu" not in tres:
        return 0, ""
    total, model = 0, ""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpu":
            total = _count(value)
        elif key.startswith("gres/gpu:") and not model:
            model = key[len("gres/gpu:") :]
            total = total or _count(value)
    return total, model


def _count(value: str) -> int:
    return int(value) if _is_count(value) else 0


def _is_count(value: str) -> bool:
    return value.isascii() and value.isdigit()  # not "²": int() refuses what isdigit() allows


def _time(field: str, value: str, tz: tzinfo) -> datetime | None:
    if value in _NO_TIME:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise _Unreadable(field, value) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=tz)


def _workload_id(cols: list[str], idx: dict[str, int]) -> str | None:
    # The broker puts the workload id in the comment; the job name and wckey are fallbacks.
    for name in ("Comment", "JobName", "WCKey"):
        i = idx.get(name)
        text = cols[i] if i is not None and i < len(cols) else ""
        if WORKLOAD_ID_PREFIX in text:
            match = _WORKLOAD_RE.search(text)
            if match:
                return match.group(0)
    return None
