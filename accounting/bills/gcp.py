"""Google Cloud billing export as CSV: labels in a JSON 'labels' column or as 'labels.<key>'."""

from __future__ import annotations

from accounting.bills.base import BillLineData, Columns, RowParser, json_tags


def row_parser(cols: Columns) -> RowParser:
    start = cols.require("usage_start_time")
    sku = cols.require("sku.description")
    amount = cols.require("usage.amount")
    cost = cols.require("cost")
    currency = cols.find("currency")
    resource = cols.find("resource.global_name", "resource.name", "project.id")
    labels = cols.find("labels")
    label_cols = {name[len("labels.") :]: i for i, name in enumerate(cols.header) if name.startswith("labels.")}

    def parse(row: list[str], line: int) -> BillLineData:
        tags = {key: row[i].strip() for key, i in label_cols.items() if row[i].strip()}
        if labels is not None:
            parsed = json_tags(row[labels])
            if parsed is None:
                raise cols.error(line, labels, f"bad labels {row[labels].strip()[:60]!r}: expected JSON")
            tags.update(parsed)
        return BillLineData(
            line_no=line,
            usage_start=cols.moment(row, start, line),
            resource_id=cols.text(row, resource),
            description=cols.text(row, sku),
            usage_amount=cols.number(row, amount, line, empty_is_zero=True),
            cost=cols.number(row, cost, line),
            currency=cols.text(row, currency)[:3],
            tags=tags,
        )

    return parse
