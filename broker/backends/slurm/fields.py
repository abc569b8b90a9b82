"""What the Slurm parsers do with a field they do not know.

Slurm adds fields in every release (``scontrol show node`` keys, REST/``--json``
object members, sacct columns).  Two modes, owned here:

- lenient (production, the default): the parser keeps the field's raw text in the
  record's ``extra``, logs the field once per process, and carries on;
- strict (the contract tests): the parser raises ``UnknownField``, so a Slurm release
  that prints something new fails the tests until the field is looked at and listed
  in known_fields.py.

Strict is switched on with ``strict_fields()`` (a context manager over the runtime seam,
``broker.runtime``) or for a whole process with GPUBROKER_SLURM_STRICT_FIELDS=1.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, ContextManager, Mapping

from broker import runtime

log = logging.getLogger(__name__)

STRICT_ENV = "GPUBROKER_SLURM_STRICT_FIELDS"

_state = threading.Lock()  # guards _logged
_logged: set[str] = set()


class UnknownField(Exception):
    """Strict mode: Slurm printed a field the parser does not know.

    Deliberately not a ValueError: the backend guard turns malformed answers into
    Unavailable, and an unknown field in the tests must fail them, not be retried."""

    def __init__(self, source: str, name: str, raw: str):
        super().__init__(
            f"{source}: unknown field {name!r} = {raw[:200]!r} "
            f"(list it in broker/backends/slurm/known_fields.py once it is understood)"
        )
        self.source = source
        self.name = name
        self.raw = raw


def is_strict() -> bool:
    strict = runtime.current().strict_slurm_fields
    if strict is not None:
        return bool(strict)
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def strict_fields(on: bool | None = True) -> ContextManager[object]:
    """Strict (True) or lenient (False) parsing until the block ends, whatever the environment
    says; None: as the environment says."""
    return runtime.override(strict_slurm_fields=on)


def raw_text(value: Any) -> str:
    """The field as Slurm gave it: text as is, JSON values as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def unknown_fields(source: str, items: Mapping[str, Any], known: frozenset[str]) -> dict[str, str]:
    """The members of ``items`` not in ``known``, as raw text.  Strict: UnknownField on
    the first one.  Lenient: each is logged once per process (per source and name)."""
    extra = {name: raw_text(value) for name, value in items.items() if name not in known}
    for name, raw in extra.items():
        if is_strict():
            raise UnknownField(source, name, raw)
        key = f"{source}:{name}"
        with _state:
            first = key not in _logged
            _logged.add(key)
        if first:
            log.warning(
                "Slurm %s has a field this broker does not know: %s=%.200s (kept as raw text; logged once)",
                source,
                name,
                raw,
            )
    return extra
