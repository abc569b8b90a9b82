"""Pure, streaming parsers of cloud bill CSV exports (AWS CUR, GCP billing, Azure cost details).

They read bytes line by line, never touch the database, and report the first problem
of a malformed file with its file name, line and column.
"""

from accounting.bills.base import BillLineData, BillParseError, ParseOutcome, parse_bill

__all__ = ["BillLineData", "BillParseError", "ParseOutcome", "parse_bill"]
