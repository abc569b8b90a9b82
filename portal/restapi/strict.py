"""Strict input: a JSON body's unknown fields and wrongly typed values are errors that name
the field, for every app's API."""

from __future__ import annotations

import difflib

from rest_framework import serializers

# The JSON type each kind of field takes as it is, not coerced: "8" is not 8, 0 is not "0".
_JSON_TYPES: tuple[tuple[type, tuple[type, ...], str], ...] = (
    (serializers.BooleanField, (bool,), "true or false"),
    (serializers.IntegerField, (int,), "a whole number"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.ListField, (list,), "a list"),
    (serializers.CharField, (str,), "text"),
    (serializers.ChoiceField, (str,), "text"),
)


class StrictSerializer(serializers.Serializer):
    """Input serializer (for JSON bodies) that refuses fields it does not know, naming each
    (and the field meant, where one is close): a misspelled ``gpu_per_worker`` must not become
    a default; and a value of the wrong JSON type is an error, not a coercion."""

    def to_internal_value(self, data):
        problems = self._problems(data) if isinstance(data, dict) else {}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if problems and isinstance(exc.detail, dict):
                exc.detail.update(problems)
            raise
        if problems:
            raise serializers.ValidationError(problems)
        return value

    def _problems(self, data: dict) -> dict[str, list[str]]:
        out = {}
        for name, raw in data.items():
            field = self.fields.get(name)
            if field is None:
                close = difflib.get_close_matches(str(name), list(self.fields), n=1)
                out[str(name)] = ["Unknown field." + (f" Did you mean {close[0]!r}?" if close else "")]
            elif raw is not None and (words := _wrong_type(field, raw)):
                out[name] = [f"must be {words}."]
        return out


def _wrong_type(field: serializers.Field, raw) -> str:
    for kind, types, words in _JSON_TYPES:
        if isinstance(field, kind):
            ok = isinstance(raw, types) and not (isinstance(raw, bool) and bool not in types)
            if ok and isinstance(field, serializers.ListField) and isinstance(field.child, serializers.CharField):
                ok = all(isinstance(item, str) for item in raw)
                words = "a list of text"
            return "" if ok else words
    return ""
