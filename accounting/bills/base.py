"""What every bill format shares: decoding, the CSV walk, numbers, dates and errors."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Callable, Iterable, Iterator, Sequence

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class BillLineData:
    line_no: int
    usage_start: datetime
    resource_id: str
    description: str
    usage_amount: Decimal
    cost: Decimal
    currency: str
    tags: dict[str, str]


class BillParseError(Exception):
    """Where a bill file went wrong: file, line (1 = header) and column (1-based)."""

    def __init__(self, file_name: str, line: int, column: int | None, message: str, column_name: str = ""):
        self.file_name, self.line, self.column = file_name, line, column
        self.column_name, self.message = column_name, message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file_name}, line {self.line}"
        if self.column is not None:
            where += f", column {self.column}"
            if self.column_name:
                where += f" ({self.column_name})"
        return f"{where}: {self.message}"


@dataclass
class ParseOutcome:
    lines: list[BillLineData] = field(default_factory=list)
    errors: list[BillParseError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


class Columns:
    """Header name -> index, and the one place that turns a cell into a value or an error."""

    def __init__(self, header: Sequence[str], file_name: str):
        self.header = [h.strip() for h in header]
        self.index = {name: i for i, name in enumerate(self.header)}
        self.file_name = file_name

    def find(self, *names: str) -> int | None:
        return next((self.index[n] for n in names if n in self.index), None)

    def require(self, *names: str) -> int:
        i = self.find(*names)
        if i is None:
            raise BillParseError(self.file_name, 1, None, f"missing column {names[0]!r}")
        return i

    def error(self, line: int, i: int, message: str) -> BillParseError:
        return BillParseError(self.file_name, line, i + 1, message, self.header[i])

    def text(self, row: Sequence[str], i: int | None) -> str:
        return row[i].strip() if i is not None and i < len(row) else ""

    def number(self, row: Sequence[str], i: int, line: int, *, empty_is_zero: bool = False) -> Decimal:
        raw = self.text(row, i)
        if raw == "" and empty_is_zero:
            return Decimal("0")
        try:
            value = Decimal(raw)
        except InvalidOperation:
            raise self.error(line, i, f"bad number {raw!r}") from None
        if not value.is_finite():
            raise self.error(line, i, f"bad number {raw!r}")
        return value

    def moment(self, row: Sequence[str], i: int, line: int) -> datetime:
        raw = self.text(row, i)
        value = parse_moment(raw)
        if value is None:
            raise self.error(line, i, f"bad date {raw!r}")
        return value


_DATE_FORMATS = ("%m/%d/%Y", "%m/%d/%Y %H:%M:%S", "%Y-%m-%d %H:%M:%S %Z")


def parse_moment(raw: str) -> datetime | None:
    """ISO 8601 (with Z), 'YYYY-MM-DD HH:MM:SS UTC' (GCP) or MM/DD/YYYY (Azure); naive = UTC."""
    text = raw.strip()
    if not text:
        return None
    if text.endswith(" UTC"):
        text = text[:-4]
    value: datetime | None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        value = _strptime(text)
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _strptime(text: str) -> datetime | None:
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


def decoded_lines(raw: Iterable[bytes], file_name: str) -> Iterator[str]:
    """UTF-8 lines (a BOM is allowed); the first non-UTF-8 byte is reported where it sits."""
    for n, chunk in enumerate(raw, start=1):
        if n == 1 and chunk.startswith(_BOM):
            chunk = chunk[len(_BOM) :]
        try:
            yield chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            column = len(chunk[: exc.start].decode("utf-8", errors="replace")) + 1
            raise BillParseError(
                file_name, n, column, f"not UTF-8 (byte 0x{chunk[exc.start]:02x}); export the file as UTF-8"
            ) from None


RowParser = Callable[[list[str], int], BillLineData]


def parse_rows(
    raw: Iterable[bytes], file_name: str, make_parser: Callable[[Columns], RowParser]
) -> Iterator[BillLineData | BillParseError]:
    """Yield each line or its error; a file-level problem (encoding, header) is raised."""
    reader = csv.reader(decoded_lines(raw, file_name))
    header = next(reader, None)
    if not header or not any(h.strip() for h in header):
        raise BillParseError(file_name, 1, None, "empty file: no header line")
    cols = Columns(header, file_name)
    parse_row = make_parser(cols)
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        line = reader.line_num
        if len(row) != len(cols.header):
            yield BillParseError(
                file_name,
                line,
                min(len(row), len(cols.header)) + 1,
                f"{len(row)} fields, the header has {len(cols.header)}",
            )
            continue
        try:
            yield parse_row(row, line)
        except BillParseError as exc:
            yield exc


def collect(items: Iterator[BillLineData | BillParseError], file_name: str, max_errors: int) -> ParseOutcome:
    """Read everything before anything is stored; stop after ``max_errors`` problems."""
    outcome = ParseOutcome()
    try:
        for item in items:
            if isinstance(item, BillParseError):
                outcome.errors.append(item)
                if len(outcome.errors) >= max_errors:
                    break
            else:
                outcome.lines.append(item)
    except BillParseError as exc:
        outcome.errors.append(exc)
    except csv.Error as exc:
        outcome.errors.append(BillParseError(file_name, 0, None, f"not a CSV file: {exc}"))
    return outcome


def tag_key(key: str) -> str:
    """Compare tag keys the way AWS CUR column names spell them: 'gpubroker-workload' ==
    'gpubroker_workload' == 'GpuBroker Workload'."""
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def json_tags(raw: str) -> dict[str, str] | None:
    """JSON object, Azure's brace-less '"k": "v","k2": "v2"', or GCP's [{key, value}]; None if bad."""
    text = raw.strip()
    if not text:
        return {}
    if not text.startswith(("{", "[")):
        text = "{" + text + "}"
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, list) and all(isinstance(i, dict) and "key" in i for i in value):
        return {str(i["key"]): str(i.get("value", "")) for i in value}
    return None
