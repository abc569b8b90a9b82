"""The trace reader: every bad line reported with its line and column."""
from __future__ import annotations

import pytest

from broker.replay.trace import TraceError, parse_trace, read_trace
from tests.broker.replay.conftest import HEADER


def parse(*rows: str, header: str = HEADER, limit: int | None = None):
    return parse_trace([header, *rows], source="t.csv", limit=limit)


def test_reads_rows_with_alternatives_and_empty_duration():
    rows = parse("a,5,,V100M16|V100M32|V100M32,1,1,,Pending", "b,7,app_1,,0,1,30,Running")
    assert rows[0].gpu_types == ("V100M16", "V100M32")  # the repeat in the source is dropped
    assert rows[0].duration_s is None and rows[0].line == 2
    assert rows[1].tenant == "app_1" and rows[1].gpu_types == () and rows[1].gpus_per_worker == 0


def test_every_bad_line_is_reported_with_line_and_column():
    with pytest.raises(TraceError) as err:
        parse("a,x,,,1,1,10,Running", "b,5,,,1,0,10,Running", "c,5,,,-1,1,,Running",
              "d,5,,,1,1,1.5,Running")
    where = [(p.line, p.column) for p in err.value.problems]
    assert where == [(2, "submit_time_s"), (3, "workers"), (4, "gpus_per_worker"),
                     (5, "duration_s")]
    assert "t.csv:2: submit_time_s: must be a whole number, not 'x'" in str(err.value)


def test_missing_column_repeated_id_and_extra_field_are_errors():
    with pytest.raises(TraceError, match="workers: column missing"):
        parse("a,1,,,1,10,Running", header="job_id,submit_time_s,tenant,gpu_type,"
              "gpus_per_worker,duration_s,status")
    with pytest.raises(TraceError, match="'a' repeats line 2"):
        parse("a,1,,,1,1,10,Running", "a,2,,,1,1,10,Running")
    with pytest.raises(TraceError, match="more fields than the header"):
        parse("a,1,,,1,1,10,Running,surplus")


def test_limit_keeps_the_first_records(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("\n".join([HEADER] + [f"j{i},{i},,,1,1,10,Running" for i in range(10)]))
    assert [r.job_id for r in read_trace(path, limit=3)] == ["j0", "j1", "j2"]


def test_unreadable_file_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="missing.csv"):
        read_trace(tmp_path / "missing.csv")


def test_reads_the_shared_trace_header():
    # the format of ../shared/traces: one real line, parsed as such
    rows = parse("openb-pod-0000,0,,,1,1,12537496,Running")
    assert rows[0].duration_s == 12537496 and rows[0].status == "Running"
