"""Azure cost details CSV (EA / MCA): tags as JSON, with or without the outer braces."""

from __future__ import annotations

from accounting.bills.base import BillLineData, Columns, RowParser, json_tags


def row_parser(cols: Columns) -> RowParser:
    start = cols.require("Date", "date")
    meter = cols.require("MeterCategory", "meterCategory")
    amount = cols.require("Quantity", "quantity")
    cost = cols.require("CostInBillingCurrency", "costInBillingCurrency")
    tags_col = cols.require("Tags", "tags")
    sub_meter = cols.find("MeterName", "meterName", "MeterSubCategory", "meterSubCategory")
    resource = cols.find("ResourceId", "resourceId", "InstanceName", "instanceName")
    currency = cols.find("BillingCurrencyCode", "BillingCurrency", "billingCurrencyCode", "billingCurrency")

    def parse(row: list[str], line: int) -> BillLineData:
        tags = json_tags(row[tags_col])
        if tags is None:
            raise cols.error(line, tags_col, f"bad tags {row[tags_col].strip()[:60]!r}: expected JSON")
        description = " / ".join(p for p in (cols.text(row, meter), cols.text(row, sub_meter)) if p)
        return BillLineData(
            line_no=line,
            usage_start=cols.moment(row, start, line),
            resource_id=cols.text(row, resource),
            description=description,
            usage_amount=cols.number(row, amount, line, empty_is_zero=True),
            cost=cols.number(row, cost, line),
            currency=cols.text(row, currency)[:3],
            tags=tags,
        )

    return parse
