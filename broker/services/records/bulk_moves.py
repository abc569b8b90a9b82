"""Moving a chunk of rows in one conditional update (``transitions.transition`` with
``where={"id__in": ...}``): a column whose new value differs per row (``per_row``); the audit
record each moved row gets is ``transitions.moved_record``, stored together with ``audit_many``.

The caller locks the rows first and moves only those it locked in the source state, so it
knows which rows moved and writes one record for each (``transition`` itself writes one
note per call).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Never, TypeVar

from django.core.serializers.json import DjangoJSONEncoder
from django.db import NotSupportedError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Expression, F, Field, JSONField, Value
from django.db.models.expressions import BaseExpression, Combinable
from django.db.models.sql.compiler import SQLCompiler

_K = TypeVar("_K")


class PerRow(Expression):
    """The new value of ``column`` for each row, looked up by the row's ``key`` in one JSON
    parameter: one UPDATE sets a different value on every row of a chunk (a CASE of fifty
    WHENs costs Django more to build than the database to run).  A row whose key is not in
    ``values`` keeps its value."""

    def __init__(self, key: str, values: Mapping[_K, object], field: Field[Never, object], column: str) -> None:
        super().__init__(output_field=field)
        self.mapping: Combinable | Expression = Value(
            json.dumps({str(k): v for k, v in values.items()}, cls=DjangoJSONEncoder)
        )
        self.key: Combinable | Expression = F(key)
        self.column: Combinable | Expression = F(column)

    def get_source_expressions(self) -> list[Combinable | Expression]:
        return [self.mapping, self.key, self.column]

    def set_source_expressions(self, exprs: Sequence[Combinable | Expression]) -> None:
        self.mapping, self.key, self.column = exprs

    def as_sql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: object
    ) -> tuple[str, tuple[str | int, ...]]:
        mapping, mapping_params = compiler.compile(_resolved(self.mapping))
        key, key_params = compiler.compile(_resolved(self.key))
        column, column_params = compiler.compile(_resolved(self.column))
        json_column = isinstance(self.output_field, JSONField)
        if connection.vendor == "postgresql":
            found = f"(({mapping})::jsonb {'->' if json_column else '->>'} ({key})::text)"
            if not json_column:
                found = f"({found})::{self.output_field.db_type(connection)}"
        elif connection.vendor == "sqlite":
            found = f"json_extract({mapping}, '$.\"' || ({key}) || '\"')"
            if json_column:
                found = f"json({found})"
        else:
            raise NotSupportedError(f"per-row values on {connection.vendor}")
        return f"COALESCE({found}, {column})", (*mapping_params, *key_params, *column_params)


def _resolved(node: Combinable | Expression) -> BaseExpression:
    """A source expression as the compiler sees it: the query resolved each ``F`` to a column."""
    if not isinstance(node, BaseExpression):
        raise TypeError(f"per-row values compiled before the query resolved {node!r}")
    return node


def per_row(key: str, values: Mapping[_K, object], field: Field[Never, object], column: str) -> PerRow:
    """``column``'s new value for each row whose ``key`` is in ``values`` (see PerRow)."""
    return PerRow(key, values, field, column)
