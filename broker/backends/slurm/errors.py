"""Slurm's error texts and REST error lists: refusal or "did not answer"."""

from __future__ import annotations

from typing import Any

from broker.backends.slurm.values import clean, number

# text that says "the control plane did not answer", not "it refused the job"
TRANSIENT_MARKERS = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "connect failure",
    "zero bytes were transmitted",
    "communication connection failure",
    "temporarily unable",
    "try again",
    "resource temporarily unavailable",
    "slurmctld is busy",
    "connection reset",
    "connection timed out",
    "no route to host",
    "broken pipe",
    "transport endpoint",
    "protocol authentication error",
    "invalid authentication credential",
    "munge",
    "slurmdbd",
    "unable to connect",
    "name or service not known",
    "unspecified error",
    "in standby mode",
    "not responding",
)


def is_transient(text: str) -> bool:
    low = text.lower()
    return any(marker in low for marker in TRANSIENT_MARKERS)


def slurm_error_message(text: str) -> str:
    """The short refusal of sbatch's stderr: the text after the last 'error:'."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if "submission failed:" in line:
            return line.split("submission failed:", 1)[1].strip()
    for line in reversed(lines):
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return lines[-1] if lines else ""


def rest_errors(payload: Any) -> list[tuple[int, str]]:
    """(code, text) of a REST reply's ``errors`` (22.05 uses error_code/errno, slurmdb
    error_number; 23.02+ error_number too)."""
    out = []
    if isinstance(payload, dict):
        for e in payload.get("errors") or ():
            if not isinstance(e, dict):
                continue
            code = e.get("error_code", e.get("error_number", e.get("errno", 0)))
            text = clean(e.get("error")) or clean(e.get("description"))
            out.append((number(code, 0), text))
    return out


def rest_error_is_rejection(code: int, text: str) -> bool:
    """ESLURM_* job errors (2000-4999) and slurmrestd's request errors (9000 invalid
    query, 9001 parse failure, 9002 invalid job description) are refusals unless the
    text says otherwise; protocol/communication errors (1000s, 5000s) and -1 are not."""
    if is_transient(text):
        return False
    return 2000 <= code < 5000 or code in (9000, 9001, 9002)
