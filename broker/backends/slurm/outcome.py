"""How a Slurm job ended: its State, ExitCode and Reason -> JobOutcome, in plain words.

Where the figures come from differs by transport and release:

- commands: ``sacct --format=JobID,State,ExitCode,Reason`` (``ExitCode`` is ``code:signal``);
- REST: slurmctld's ``GET /slurm/vX/job/<id>`` while it still holds the job (MinJobAge),
  else slurmdbd's ``GET /slurmdb/vX/job/<id>``.  v0.0.38 (22.05) gives ``exit_code`` as
  the raw wait status (768 for exit 3) and its slurmdbd record says ``return_code`` 0
  even for a job that exited 3, so a FAILED job with "success" there has no known code;
  v0.0.40+ give ``{"return_code": {"number": 3}, "signal": {"id": {"number": 0}}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from broker.backends.base import JobOutcome, exit_words
from broker.backends.slurm.states import job_state_base
from broker.backends.slurm.values import clean, number

US = "\x1f"
SACCT_END_FIELDS = ("JobID", "State", "ExitCode", "Reason")

# Slurm's end states that say more than the exit code does
_WORDS = {
    "TIMEOUT": "stopped at its time limit (TIMEOUT)",
    "OUT_OF_MEMORY": "ran out of memory (OUT_OF_MEMORY)",
    "CANCELLED": "cancelled (CANCELLED)",
    "NODE_FAIL": "a node it ran on failed (NODE_FAIL)",
    "PREEMPTED": "preempted by another job (PREEMPTED)",
    "BOOT_FAIL": "its nodes failed to boot (BOOT_FAIL)",
    "DEADLINE": "not finished by its deadline (DEADLINE)",
    "REVOKED": "revoked by a sibling cluster (REVOKED)",
}


@dataclass(frozen=True)
class SlurmEnd:
    """One ended job's figures, as read from sacct or the REST API."""

    job_id: str
    state: str  # base state: TIMEOUT, FAILED, ...
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""


def outcome(state: str, exit_code: int | None = None, signal: int | None = None, reason: str = "") -> JobOutcome:
    """The outcome of a job that ended in ``state`` (Slurm's base state word)."""
    detail = "" if clean(reason) in ("", "None") else clean(reason)
    if state in _WORDS:
        summary = _WORDS[state]
    elif state == "FAILED" and exit_code is None and not signal:
        summary = "failed; Slurm did not say with which exit code"
    else:
        summary = exit_words(exit_code, signal)
    return JobOutcome(summary=summary, end_reason=state, exit_code=exit_code, signal=signal or None, detail=detail)


def parse_exit_code(text: Any) -> tuple[int | None, int | None]:
    """sacct's ``3:0`` -> (3, 0); anything else -> (None, None)."""
    code, _, sig = clean(text).partition(":")
    if not code.isdigit():
        return None, None
    return int(code), int(sig) if sig.isdigit() else 0


def sacct_end_args() -> list[str]:
    return [
        "--allusers",
        "--parsable2",
        "--allocations",
        "--noheader",
        f"--delimiter={US}",
        "--format=" + ",".join(SACCT_END_FIELDS),
    ]


def parse_sacct_ends(lines: Iterable[str]) -> dict[str, SlurmEnd]:
    ends: dict[str, SlurmEnd] = {}
    for line in lines:
        values = line.rstrip("\n").split(US)
        if len(values) != len(SACCT_END_FIELDS):
            continue
        f = dict(zip(SACCT_END_FIELDS, values, strict=True))
        code, sig = parse_exit_code(f["ExitCode"])
        ends[clean(f["JobID"])] = SlurmEnd(clean(f["JobID"]), job_state_base(f["State"]), code, sig, clean(f["Reason"]))
    return ends


def exit_from_json(value: Any, state: str) -> tuple[int | None, int | None]:
    """A REST ``exit_code``: a raw wait status (v0.0.38 slurmctld) or an object."""
    if isinstance(value, bool) or value is None:
        return None, None
    if isinstance(value, int):
        return (value >> 8) & 0xFF, value & 0x7F
    if not isinstance(value, Mapping):
        return None, None
    status = value.get("status")
    words = {clean(s).upper() for s in (status if isinstance(status, list) else [status])}
    code = number(value.get("return_code"), -1)
    sig_field = value.get("signal")
    sig = number(sig_field.get("id"), 0) if isinstance(sig_field, Mapping) else number(sig_field, 0)
    if code < 0 or (state == "FAILED" and code == 0 and not sig and words <= {"SUCCESS"}):
        return None, sig or None  # 22.05's slurmdbd record: "success" for a job that failed
    return code, sig


def end_from_json(d: Mapping[str, Any]) -> SlurmEnd:
    """From a job of ``/slurm/vX/job/<id>`` (job_state, state_reason) or of
    ``/slurmdb/vX/job/<id>`` (state.current, state.reason)."""
    st = d.get("state")
    if isinstance(st, Mapping):
        state, reason = job_state_base(st.get("current")), clean(st.get("reason"))
    else:
        state, reason = job_state_base(d.get("job_state")), clean(d.get("state_reason"))
    code, sig = exit_from_json(d.get("exit_code"), state)
    return SlurmEnd(str(number(d.get("job_id"), 0)), state, code, sig, reason)
