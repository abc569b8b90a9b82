"""Accounting settings with their defaults, so the app works before settings.py names them.

Each value can be set in settings.py (or its environment variable there); the
default here is what a site gets without doing anything.
"""

from __future__ import annotations

from django.conf import settings

DEFAULTS: dict[str, object] = {
    # Fraction: broker and scheduler GPU-hours may differ this much before it is a discrepancy.
    "GPUBROKER_ACCOUNTING_TOLERANCE": 0.02,
    # Bill tag keys carrying the project (slug, Slurm account or namespace) and the workload id.
    "GPUBROKER_ACCOUNTING_PROJECT_TAGS": ("project",),
    "GPUBROKER_ACCOUNTING_WORKLOAD_TAGS": ("gpubroker-workload",),
    # Re-read this many seconds before the watermark: schedulers write records late.
    "GPUBROKER_ACCOUNTING_OVERLAP_S": 3600,
    # A cluster's first collection looks this far back (no watermark yet).
    "GPUBROKER_ACCOUNTING_FIRST_LOOKBACK_DAYS": 62,
    # Rows per bulk write of the usage ledger.
    "GPUBROKER_ACCOUNTING_CHUNK": 5000,
    # Instance type / SKU text (lower case, substring) -> GPU class slug, for bill lines.
    "GPUBROKER_ACCOUNTING_BILL_GPU_CLASSES": {},
    # Most parse errors listed for one rejected bill (the first one always leads).
    "GPUBROKER_ACCOUNTING_MAX_BILL_ERRORS": 20,
}


def setting(name: str):
    return getattr(settings, name, DEFAULTS[name])


def tolerance() -> float:
    return float(setting("GPUBROKER_ACCOUNTING_TOLERANCE"))


def chunk_size() -> int:
    return max(1, int(setting("GPUBROKER_ACCOUNTING_CHUNK")))


def project_tags() -> tuple[str, ...]:
    return tuple(_as_list(setting("GPUBROKER_ACCOUNTING_PROJECT_TAGS")))


def workload_tags() -> tuple[str, ...]:
    return tuple(_as_list(setting("GPUBROKER_ACCOUNTING_WORKLOAD_TAGS")))


def _as_list(value) -> list[str]:
    # settings may hold one key as a plain string (e.g. from an env var)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)
