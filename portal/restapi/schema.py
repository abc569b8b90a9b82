"""Schema post-processing: every operation documents the one error shape it may answer."""

from __future__ import annotations

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "fields"],
            "properties": {
                "code": {"type": "string", "description": "snake_case, e.g. invalid, not_found, token_expired"},
                "message": {"type": "string"},
                "fields": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    "description": "Each field (or header, or query parameter) in error, with its messages",
                },
            },
        }
    },
}
ERRORS = {
    "400": "invalid input, per field",
    "401": "not authenticated, or the token is expired or revoked",
    "403": "the caller's roles do not allow it",
    "404": "no such object (for this caller)",
}


def add_error_responses(result: dict, generator, request, public) -> dict:
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, item in result.get("paths", {}).items():
        if not path.startswith("/api/v1/") or path.startswith(("/api/v1/schema/", "/api/v1/docs/")):
            continue
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            responses = operation.setdefault("responses", {})
            for code, words in ERRORS.items():
                responses.setdefault(code, {"description": words, "content": ref})
            if "409" in responses:
                responses["409"]["content"] = ref
    return result
