"""Keep what a calibration of the simulator found, for ``/fleet/``: one row per run of
``manage.py calibrate``, the medians over its repetitions beside each repetition's figures."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from collections.abc import Mapping, Sequence

from django.db import transaction

from broker import runtime
from broker.models import SimulatorCalibration
from broker.services.records.audit import audit


@dataclass(frozen=True)
class CalibrationFigures:
    cluster: str
    control_plane: str
    partition: str
    job_list: str
    commit: str
    scheduler: str
    cycle_s: float
    # each repetition's agreement (broker.calibration.compare.Agreement.to_json())
    repetitions: Sequence[Mapping[str, object]]


@transaction.atomic
def calibration_record(*, figures: CalibrationFigures) -> SimulatorCalibration:
    reps = list(figures.repetitions)
    if not reps:
        raise ValueError("a calibration without a repetition has nothing to keep")

    def median(key: str) -> float:
        return float(statistics.median(_number(r[key], key) for r in reps))

    row = SimulatorCalibration.objects.create(
        cluster=figures.cluster,
        control_plane=figures.control_plane,
        partition=figures.partition,
        job_list=figures.job_list,
        commit=figures.commit,
        scheduler=figures.scheduler,
        cycle_s=figures.cycle_s,
        jobs=int(_number(reps[0]["jobs"], "jobs")),
        pair_order=median("pair_order"),
        median_abs_error_s=median("median_abs_error_s"),
        p95_abs_error_s=median("p95_abs_error_s"),
        reason_agreement=median("reason_agreement"),
        repetitions=[{k: v for k, v in r.items() if k != "errors_s"} for r in reps],
        recorded_at=runtime.now(),
    )
    audit(
        action="simulator.calibrated",
        cluster=figures.cluster,
        message=str(row),
        inputs={"job_list": figures.job_list, "commit": figures.commit, "repetitions": len(reps)},
    )
    return row


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a repetition's {key} is not a number: {value!r}")
    return float(value)
