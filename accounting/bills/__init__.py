"""Pure, streaming parsers of cloud bill CSV exports (AWS CUR, GCP billing, Azure cost details).

They read bytes line by line, never touch the database, and report the first problem
of a malformed file with its file name, line and column.
"""

from collections.abc import Iterable

from accounting.bills import aws, azure, gcp
from accounting.bills.base import BillLineData, BillParseError, ParseOutcome, collect, parse_rows

__all__ = ["BillLineData", "BillParseError", "ParseOutcome", "parse_bill"]


def parse_bill(raw: Iterable[bytes], *, provider: str, file_name: str, max_errors: int = 20) -> ParseOutcome:
    """Parse a whole bill of ``provider`` (aws, gcp, azure) into lines or errors."""
    parsers = {"aws": aws.row_parser, "gcp": gcp.row_parser, "azure": azure.row_parser}
    if provider not in parsers:
        raise ValueError(f"unknown bill provider {provider!r}")
    return collect(parse_rows(raw, file_name, parsers[provider]), file_name, max_errors)
