"""AWS Cost and Usage Report, CSV (Athena-style column names, or the legacy 'lineItem/...')."""

from __future__ import annotations

from accounting.bills.base import BillLineData, Columns, RowParser

_TAG_PREFIXES = ("resource_tags_user_", "resourceTags/user:")


def row_parser(cols: Columns) -> RowParser:
    start = cols.require("line_item_usage_start_date", "lineItem/UsageStartDate")
    amount = cols.require("line_item_usage_amount", "lineItem/UsageAmount")
    cost = cols.require("line_item_unblended_cost", "lineItem/UnblendedCost")
    resource = cols.require("line_item_resource_id", "lineItem/ResourceId")
    instance = cols.require("product_instance_type", "product/instanceType")
    usage_type = cols.find("line_item_usage_type", "lineItem/UsageType")
    currency = cols.find("line_item_currency_code", "lineItem/CurrencyCode")
    tag_cols = {
        name[len(prefix) :]: i
        for i, name in enumerate(cols.header)
        for prefix in _TAG_PREFIXES
        if name.startswith(prefix)
    }

    def parse(row: list[str], line: int) -> BillLineData:
        tags = {key: row[i].strip() for key, i in tag_cols.items() if row[i].strip()}
        return BillLineData(
            line_no=line,
            usage_start=cols.moment(row, start, line),
            resource_id=cols.text(row, resource),
            # lines that are no instance (data transfer, storage) say what they are in the usage type
            description=cols.text(row, instance) or cols.text(row, usage_type),
            usage_amount=cols.number(row, amount, line, empty_is_zero=True),
            cost=cols.number(row, cost, line),
            currency=cols.text(row, currency)[:3],
            tags=tags,
        )

    return parse
