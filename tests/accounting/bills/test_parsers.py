"""Bill parsers: pure functions over bytes; each format from a realistic sample, each
malformed kind reported with its file, line and column."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest

from accounting.bills import parse_bill
from accounting.bills.base import json_tags, parse_moment, tag_key
from tests.accounting.helpers import FIXTURES


def _parse(name: str, provider: str, data: bytes | None = None):
    raw = data if data is not None else (FIXTURES / name).read_bytes()
    return parse_bill(raw.splitlines(keepends=True), provider=provider, file_name=name)


def test_aws_cur_sample():
    out = _parse("aws_cur.csv", "aws")
    assert out.ok and len(out.lines) == 5
    first = out.lines[0]
    assert first.line_no == 2 and first.description == "p4d.24xlarge" and first.resource_id == "i-0a1b2c3d4e5f60001"
    assert first.cost == Decimal("32.7726000000") and first.currency == "USD"
    assert first.usage_start == datetime(2026, 11, 3, 9, tzinfo=timezone.utc)
    assert first.tags == {"project": "lattice", "gpubroker_workload": "wl-00000000000000a1", "team": "qcd"}
    assert out.lines[3].tags == {}
    assert sum(line.cost for line in out.lines) == Decimal("165.0317806452")


def test_gcp_sample_with_json_labels():
    out = _parse("gcp_billing.csv", "gcp")
    assert out.ok and len(out.lines) == 3
    gpu = out.lines[0]
    assert gpu.description == "Nvidia Tesla A100 GPU running in EMEA" and gpu.currency == "EUR"
    assert gpu.tags == {"project": "lattice", "gpubroker-workload": "wl-00000000000000b2"}
    assert gpu.usage_start == datetime(2026, 11, 5, 8, tzinfo=timezone.utc)
    assert out.lines[2].usage_amount == Decimal("1.5e12") and out.lines[2].tags == {}


def test_gcp_sample_with_label_columns():
    out = _parse("gcp_billing_label_columns.csv", "gcp")
    assert out.ok and [line.tags for line in out.lines] == [{"project": "lattice"}, {}]


def test_azure_sample_with_and_without_braces():
    out = _parse("azure_cost_details.csv", "azure")
    assert out.ok and len(out.lines) == 3
    nd, nc, net = out.lines
    assert nd.tags == {"project": "lattice", "gpubroker-workload": "wl-00000000000000c3"}
    assert nd.usage_start == datetime(2026, 11, 7, tzinfo=timezone.utc)
    assert nd.description == "Virtual Machines / ND96asr A100 v4" and nd.cost == Decimal("54.394")
    assert nc.tags == {"project": "lattice"} and net.tags == {}


def _replace_cell(provider: str, name: str, line: int, column: str, value: str) -> bytes:
    """The sample with one cell changed (by a plain CSV round trip)."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO((FIXTURES / name).read_text())))
    rows[line - 1][rows[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode()


MALFORMED = [
    # provider, sample, line, column name, bad value, expected message
    ("aws", "aws_cur.csv", 3, "line_item_unblended_cost", "32,77", "bad number '32,77'"),
    ("aws", "aws_cur.csv", 4, "line_item_usage_start_date", "2026-13-45T00:00:00Z", "bad date"),
    ("gcp", "gcp_billing.csv", 2, "usage.amount", "lots", "bad number 'lots'"),
    ("gcp", "gcp_billing.csv", 3, "usage_start_time", "yesterday", "bad date 'yesterday'"),
    ("azure", "azure_cost_details.csv", 4, "CostInBillingCurrency", "NaN", "bad number 'NaN'"),
    ("azure", "azure_cost_details.csv", 2, "Date", "31/31/2026", "bad date '31/31/2026'"),
]


@pytest.mark.parametrize("provider,name,line,column,value,message", MALFORMED)
def test_bad_number_and_bad_date_name_their_position(provider, name, line, column, value, message):
    data = _replace_cell(provider, name, line, column, value)
    out = _parse(name, provider, data)
    first = out.errors[0]
    header = (FIXTURES / name).read_text().splitlines()[0].split(",")
    where = (first.file_name, first.line, first.column, first.column_name)
    assert where == (name, line, header.index(column) + 1, column)
    assert message in first.message
    assert f"{name}, line {line}, column {header.index(column) + 1} ({column})" in str(first)


@pytest.mark.parametrize("provider,name,column", [
    ("aws", "aws_cur.csv", "line_item_unblended_cost"),
    ("gcp", "gcp_billing.csv", "usage_start_time"),
    ("azure", "azure_cost_details.csv", "Tags"),
])
def test_missing_column_is_reported_on_the_header_line(provider, name, column):
    text = (FIXTURES / name).read_text().replace(column, "something_else", 1)
    out = _parse(name, provider, text.encode())
    assert len(out.errors) == 1 and out.lines == []
    first = out.errors[0]
    assert (first.line, first.column) == (1, None) and f"missing column {column!r}" in first.message


@pytest.mark.parametrize("provider,name", [("aws", "aws_cur.csv"), ("gcp", "gcp_billing.csv"),
                                           ("azure", "azure_cost_details.csv")])
def test_wrong_encoding_is_reported_where_the_byte_sits(provider, name):
    lines = (FIXTURES / name).read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"EU", "\u00c9U".encode("latin-1"), 1).replace(b"eu-west-1", b"eu-west-\xe91", 1)
    out = _parse(name, provider, b"".join(lines))
    first = out.errors[0]
    assert first.line == 3 and "not UTF-8" in first.message
    expected_col = lines[2].index(b"\xc9" if b"\xc9" in lines[2] else b"\xe9") + 1
    assert first.column == expected_col


def test_utf8_bom_and_crlf_are_fine():
    data = b"\xef\xbb\xbf" + (FIXTURES / "aws_cur.csv").read_bytes().replace(b"\n", b"\r\n")
    assert _parse("aws_cur.csv", "aws", data).ok


def test_short_row_and_several_errors_are_all_listed_first_one_first():
    lines = (FIXTURES / "aws_cur.csv").read_text().splitlines()
    lines[1] = lines[1].rsplit(",", 3)[0]
    lines[3] = lines[3].replace("98.3200000000,98.3200000000", "98.32,abc")
    out = _parse("aws_cur.csv", "aws", "\n".join(lines).encode())
    assert [e.line for e in out.errors] == [2, 4]
    assert "fields, the header has" in out.errors[0].message


def test_empty_file():
    out = _parse("empty.csv", "aws", b"")
    assert out.errors[0].message.startswith("empty file")


def test_helpers():
    assert tag_key("gpubroker-workload") == tag_key("GpuBroker_Workload") == "gpubroker_workload"
    assert json_tags('"a": "1","b": "2"') == {"a": "1", "b": "2"}
    assert json_tags('[{"key": "a", "value": "1"}]') == {"a": "1"}
    assert json_tags("{not json") is None
    assert parse_moment("2026-11-05T08:00:00-08:00") == datetime(2026, 11, 5, 16, tzinfo=timezone.utc)
