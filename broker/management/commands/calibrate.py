"""`manage.py calibrate --cluster NAME --jobs FILE`: play a job list on a real Slurm
partition, Kueue queues or Volcano queues and on the simulator built from them; print how
far apart they started.

The cluster is a registered Slurm, Kueue or Volcano cluster (its backend's commands and
inventory are used, so the simulator starts from what the broker reads).  Slurm:
``--partition`` names a partition kept for the calibration, idle when the run starts (a
site's test partition).  Kueue: ``--queue`` and ``--local-queue`` name the LocalQueues (in
``--namespace``) of the list's broker and local jobs, whose ClusterQueues' flavors are idle
when the run starts.  Volcano: ``--queue`` and ``--local-queue`` name Volcano Queues and
``--pool`` the GPU pool (one model) the jobs ask for, idle when the run starts.  ``--repeat`` plays the
list again; ``--out`` writes every repetition (both sides, job by job, and the agreement) as
JSON, which ``docs/simulator.md``'s tables are made from; the latest agreement is kept for
the fleet page.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker.backends.base import Unavailable
from broker.calibration.kube import KubeSide
from broker.backends.registry import backend_for
from broker.calibration.compare import spread
from broker.calibration.jobs import JobList, load
from broker.calibration.run import Calibration, calibrate_kube, calibrate_slurm, resimulate
from broker.models import Cluster
from broker.services.fleet.calibration import CalibrationFigures, calibration_record
from portal.tenancy.errors import DomainError


class Command(BaseCommand):
    help = "Play a job list on a real Slurm partition, Kueue or Volcano queues and on the simulator built from it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", help="a registered Slurm, Kueue or Volcano cluster's name")
        parser.add_argument("--jobs", required=True, type=Path, help="the job list (JSON: broker/calibration/jobs.py)")
        parser.add_argument("--partition", default="calib", help="an idle partition kept for the calibration")
        parser.add_argument("--account", default="", help="the Slurm account to submit under (default: yours)")
        parser.add_argument("--queue", default="calib", help="Kueue's LocalQueue or Volcano's Queue of the broker jobs")
        parser.add_argument("--local-queue", default="calib-local", help="the same, of the list's local jobs")
        parser.add_argument("--namespace", default="", help="Kueue, Volcano: their namespace (default: the backend's)")
        parser.add_argument("--pool", default="", help="Volcano: the GPU pool the jobs ask for (its model)")
        parser.add_argument("--repeat", type=int, default=1)
        parser.add_argument("--out", type=Path, help="write every repetition here (JSON)")
        parser.add_argument(
            "--resimulate",
            type=Path,
            help="a recorded --out file: play its simulator side again with this simulator, against its real runs "
            "(no cluster needed; writes --out)",
        )

    def handle(self, *args: object, **opts: object) -> None:
        if opts["resimulate"]:
            self._resimulate(Path(str(opts["resimulate"])), Path(str(opts["jobs"])), opts["out"])
            return
        name = str(opts["cluster"] or "")
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None or cluster.kind not in ("slurm", "kueue", "volcano"):
            raise CommandError(f"--cluster: no Slurm, Kueue or Volcano cluster named {name!r} is registered")
        repeat = int(str(opts["repeat"]))
        if not 1 <= repeat <= 20:
            raise CommandError("--repeat: between 1 and 20")
        try:
            jobs = load(Path(str(opts["jobs"])))
            result = self._calibrate(cluster, jobs, repeat, opts)
        except (DomainError, Unavailable) as exc:
            raise CommandError(str(exc)) from exc
        if opts["out"]:
            Path(str(opts["out"])).write_text(json.dumps(result.to_json(), indent=1) + "\n")
        calibration_record(figures=figures(result))
        self.stdout.write(summary(result))

    def _calibrate(self, cluster: Cluster, jobs: JobList, repeat: int, opts: dict[str, object]) -> Calibration:
        if cluster.kind == "volcano" and not opts["pool"]:
            raise CommandError("--pool: name the GPU pool the jobs ask for (the fleet page lists the pools)")
        backend = backend_for(cluster)
        if cluster.kind in ("kueue", "volcano"):
            if not isinstance(backend, KubeSide):
                raise CommandError(f"--cluster {cluster.name}: its backend cannot play a calibration")
            return calibrate_kube(
                jobs,
                cluster=cluster.name,
                backend=backend,
                inventory=backend.inventory,
                namespace=str(opts["namespace"] or backend.settings.default_namespace),
                queue=str(opts["queue"]),
                local_queue=str(opts["local_queue"]),
                pool=str(opts["pool"]),
                repeat=repeat,
            )
        return calibrate_slurm(
            jobs,
            cluster=cluster.name,
            transport=getattr(backend, "transport", None),
            inventory=backend.inventory,
            partition=str(opts["partition"]),
            account=str(opts["account"]),
            repeat=repeat,
        )

    def _resimulate(self, recorded: Path, jobs: Path, out: object) -> None:
        if not out:
            raise CommandError("--resimulate: say where to write the result with --out")
        try:
            data = json.loads(recorded.read_text())
            again = resimulate(data, load(jobs))
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"--resimulate {recorded}: {exc}") from exc
        Path(str(out)).write_text(json.dumps(again, indent=1) + "\n")
        self.stdout.write(f"{recorded} played again by the simulator at {again['resimulated_at'] or '?'}: {out}\n")


def figures(result: Calibration) -> CalibrationFigures:
    return CalibrationFigures(
        cluster=result.cluster,
        control_plane=result.repetitions[0].real.side if result.repetitions else result.control_plane,
        partition=result.partition,
        job_list=result.job_list,
        commit=result.commit,
        scheduler=result.cycle.words,
        cycle_s=result.cycle.cycle_s,
        repetitions=[r.agreement.to_json() for r in result.repetitions],
    )


def summary(result: Calibration) -> str:
    rows = [r.agreement for r in result.repetitions]
    side = result.repetitions[0].real.side if result.repetitions else result.control_plane
    lines = [
        f"{side} on {result.cluster} ({_where(result)}), {result.job_list}, commit {result.commit or '?'}",
        f"scheduler: {result.cycle.words}; starts within {result.cycle.cycle_s:g} s count as tied",
        f"repetitions: {len(rows)}; median (min-max) over them:",
        f"  jobs {rows[0].jobs if rows else 0}, waited a cycle or more: {spread([float(a.waited) for a in rows])}",
        f"  job pairs started in the same order: {spread([a.pair_order for a in rows])}",
        f"  median |start error| s: {spread([a.median_abs_error_s for a in rows])}",
        f"  p95 |start error| s: {spread([a.p95_abs_error_s for a in rows])}",
        f"  sampled instants with the same queue reason: {spread([a.reason_agreement for a in rows])}",
        f"  started ahead of an earlier job, real: {spread([float(len(a.ahead_real)) for a in rows])}, "
        f"simulated: {spread([float(len(a.ahead_sim)) for a in rows])}; "
        f"Slurm's backfill flag: {spread([float(len(a.backfilled_real)) for a in rows])}",
        f"  preempted, real: {spread([float(a.preempted_real) for a in rows])}, "
        f"simulated: {spread([float(a.preempted_sim) for a in rows])}",
    ]
    return "\n".join(lines) + "\n"


def _where(result: Calibration) -> str:
    if result.control_plane == "kueue":
        return f"LocalQueues {result.partition}, local jobs {result.local_queue}"
    if result.control_plane == "volcano":
        return f"Queues {result.partition}, local jobs {result.local_queue}, pool {result.pool}"
    return f"partition {result.partition}"
