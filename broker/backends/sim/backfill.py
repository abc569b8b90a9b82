"""Backfilling local queues: what real schedulers do by default.

* Slurm (``SchedulerType=sched/backfill``): every waiting job it looks at is planned at
  the earliest instant its gang packs once running jobs end at their *time limits* (Slurm
  knows limits, not run times) and the jobs ahead of it have their planned GPUs; a later
  job starts now only on GPUs no planned job needs before its own limit (``sim.plan``).
* Kueue (``BestEffortFIFO``, the ClusterQueue default) and Volcano (its ``backfill``
  action): a workload that cannot be admitted does not hold back the ones behind it.

The strict-FIFO behaviour stays available (``queueing="strict"``) because tests and the
demo rely on its reasons.
"""

from __future__ import annotations

from broker.backends.sim.model import SimJob

QUEUEING = ("strict", "backfill")


def shape_of(job: SimJob) -> tuple:
    """What admission looks at, apart from the job's identity and time limit."""
    r = job.request
    return (
        job.partition,
        job.account,  # Slurm: its association's GrpTRES
        job.qos,  # Slurm: its QoS's MaxTRESPerJob
        # Volcano: a gang through the enqueue step is past its Queue's capability, and its
        # pods exist from ready_at on
        job.ready_at if job.enqueued else None,
        r.gpus_per_worker,
        r.workers,
        r.partitioning,
        r.gpu_models,
        r.gpu_class,
        r.min_gpu_memory_gb,
        r.same_interconnect,
        r.same_host,
    )
