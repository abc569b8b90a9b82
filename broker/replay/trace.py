"""Read a normalised job trace (the CSV format of ``shared/traces``).

Columns: job_id, submit_time_s, tenant, gpu_type, gpus_per_worker, workers, duration_s,
status.  Every problem is reported with its line and column, all at once (up to a
limit), because a trace is usually fixed in one pass by whoever converted it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

COLUMNS = ("job_id", "submit_time_s", "tenant", "gpu_type", "gpus_per_worker", "workers", "duration_s", "status")
MAX_REPORTED = 20  # a broken converter breaks every line: the first few say enough


@dataclass(frozen=True)
class TraceRow:
    line: int  # line in the file (the header is line 1)
    job_id: str
    submit_time_s: int
    tenant: str  # "" when the trace has none
    gpu_types: tuple[str, ...]  # any of these; () = unconstrained
    gpus_per_worker: int  # 0 = CPU-only
    workers: int
    duration_s: int | None  # None: never ran (or still running) in the trace
    status: str


@dataclass(frozen=True)
class TraceProblem:
    line: int
    column: str
    message: str


class TraceError(ValueError):
    """A trace that cannot be replayed; ``problems`` names each line and column."""

    def __init__(self, source: str, problems: list[TraceProblem], more: int = 0):
        self.source, self.problems = source, problems
        lines = [f"{source}:{p.line}: {p.column}: {p.message}" for p in problems]
        if more:
            lines.append(f"... and {more} more problem(s)")
        super().__init__(f"invalid trace {source}:\n  " + "\n  ".join(lines))


def _int(
    raw: str, column: str, line: int, problems: list[TraceProblem], *, minimum: int, empty_ok: bool = False
) -> int | None:
    text = raw.strip()
    if not text:
        if not empty_ok:
            problems.append(TraceProblem(line, column, "is empty; a whole number is required"))
        return None
    try:
        value = int(text)
    except ValueError:
        problems.append(TraceProblem(line, column, f"must be a whole number, not {text!r}"))
        return None
    if value < minimum:
        problems.append(TraceProblem(line, column, f"must be at least {minimum}, not {value}"))
        return None
    return value


def _gpu_types(raw: str) -> tuple[str, ...]:
    # 'A|B|B' = any of A, B; duplicates occur in the source data and mean nothing
    return tuple(dict.fromkeys(t.strip() for t in raw.split("|") if t.strip()))


def parse_row(values: dict[str, str], line: int, problems: list[TraceProblem]) -> TraceRow | None:
    """One CSV record, or None (with the reasons appended to ``problems``)."""
    before = len(problems)
    job_id = (values.get("job_id") or "").strip()
    if not job_id:
        problems.append(TraceProblem(line, "job_id", "is empty"))
    submit = _int(values.get("submit_time_s") or "", "submit_time_s", line, problems, minimum=0)
    gpus = _int(values.get("gpus_per_worker") or "", "gpus_per_worker", line, problems, minimum=0)
    workers = _int(values.get("workers") or "", "workers", line, problems, minimum=1)
    duration = _int(values.get("duration_s") or "", "duration_s", line, problems, minimum=0, empty_ok=True)
    if len(problems) > before:
        return None
    assert submit is not None and gpus is not None and workers is not None
    return TraceRow(
        line=line,
        job_id=job_id,
        submit_time_s=submit,
        tenant=(values.get("tenant") or "").strip(),
        gpu_types=_gpu_types(values.get("gpu_type") or ""),
        gpus_per_worker=gpus,
        workers=workers,
        duration_s=duration,
        status=(values.get("status") or "").strip(),
    )


def _records(lines: Iterable[str], source: str) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(lines)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise TraceError(source, [TraceProblem(1, c, "column missing from the header") for c in missing])
    for values in reader:
        # line_num is the physical line just read: right for records without newlines
        yield reader.line_num, values


def parse_trace(lines: Iterable[str], source: str = "<trace>", limit: int | None = None) -> list[TraceRow]:
    """Parse CSV lines; ``limit`` keeps the first N records.  Raises TraceError."""
    rows: list[TraceRow] = []
    problems: list[TraceProblem] = []
    seen: dict[str, int] = {}
    for line, values in _records(lines, source):
        if limit is not None and len(rows) + _bad_lines(problems) >= limit:
            break
        if None in values:  # more fields than the header has
            problems.append(TraceProblem(line, "(record)", "more fields than the header"))
            continue
        row = parse_row(values, line, problems)
        if row is None:
            continue
        if row.job_id in seen:
            problems.append(TraceProblem(line, "job_id", f"{row.job_id!r} repeats line {seen[row.job_id]}"))
            continue
        seen[row.job_id] = line
        rows.append(row)
    if problems:
        shown = problems[:MAX_REPORTED]
        raise TraceError(source, shown, more=len(problems) - len(shown))
    return rows


def _bad_lines(problems: list[TraceProblem]) -> int:
    return len({p.line for p in problems})


def read_trace(path: str | Path, limit: int | None = None) -> list[TraceRow]:
    """Read a trace file; raises TraceError naming every bad line (first 20)."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return parse_trace(handle, source=str(path), limit=limit)
    except OSError as exc:
        raise TraceError(str(path), [TraceProblem(0, "(file)", exc.strerror or str(exc))]) from None
