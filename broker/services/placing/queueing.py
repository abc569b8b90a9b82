"""Queue at the destination: a job that fits nowhere now, once it has waited at the broker
for the policy's ``aging.queue_after_s``, is sent to wait in the local queue of the cluster
predicted to start it first.

Held at the broker, a job competes with every smaller job for each GPU that frees, and a
gang loses to them: a single GPU that frees goes to a single job, and the gang's GPUs never
come free together.  In the destination's queue it keeps its place: Slurm's backfill
reserves nodes for the job at the head and starts smaller ones only where they do not delay
it; Kueue admits in queue order within a ClusterQueue.  The choice is the cluster whose
queue ahead of the job (its pending GPUs, and what this pass already sent there) turns over
soonest (``turnover_s``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Mapping, Sequence

from broker.models import Workload
from broker.placement import Candidate, PreparedFleet, queue_candidates
from broker.services.placing.bursting import burst_gate
from broker.services.placing.fleet_view import identity_scopes
from broker.spec import WorkloadSpec

if TYPE_CHECKING:
    from broker.services.placing.cycle import PlacingPass


def queue_choice(
    *, workload: Workload, ctx: PlacingPass, spec: WorkloadSpec, age_s: float, in_queue: bool
) -> Candidate | None:
    """Where ``workload`` should wait, or None: the policy keeps it at the broker (not
    waited long enough, or the rule is off), or no cluster could ever take it."""
    policy = ctx.fleet.policy
    after = policy.aging.queue_after_s
    if after is None or age_s < after:
        return None
    candidates = queue_candidates(ctx.fleet, spec, **ctx.ask(workload))
    if not candidates:
        return None
    gate = burst_gate(
        workload=workload,
        ranked=candidates,
        fleet=ctx.fleet,
        spec=spec,
        now=ctx.now,
        estimator=ctx.estimator,
        ahead_gpus=ctx.ahead(workload) if in_queue else None,
        spend=ctx.spend if in_queue else None,
        crossed=ctx.tco_crossed if in_queue else None,
    )
    if not gate.ranked:
        return None
    scopes = identity_scopes(workload.project)
    turnover, chosen = by_turnover(ctx.fleet, gate.ranked, spec, ctx.sent_to_queue, scopes=scopes)[0]
    # the record says it was sent to wait, and the turnover it was chosen by
    return replace(chosen, detail={**chosen.detail, "queued_turnover_s": round(turnover, 1)})


def by_turnover(
    fleet: PreparedFleet,
    candidates: list[Candidate],
    spec: WorkloadSpec,
    sent: Mapping[str, int] | None = None,
    *,
    scopes: Sequence[str] = (),
) -> list[tuple[float, Candidate]]:
    """The candidates with their turnover (``turnover_s``; ``sent``: GPUs a pass already sent
    to each cluster's queue; ``scopes``: the job's accounts), soonest first, ties in their
    ranked order."""
    sent = sent or {}
    scored = [(turnover_s(fleet, c, spec, sent.get(c.cluster, 0), scopes), i, c) for i, c in enumerate(candidates)]
    return [(t, c) for t, _, c in sorted(scored, key=lambda x: (x[0], x[1]))]


def turnover_s(
    fleet: PreparedFleet, candidate: Candidate, spec: WorkloadSpec, sent_gpus: int = 0, scopes: Sequence[str] = ()
) -> float:
    """How long the queue ahead of the job, with the job itself, takes to start: the
    cluster's pending GPUs ahead of a job of ``scopes`` (all of them, unless fair share
    puts some behind it: ``PreparedCluster.pending_ahead``), as last reported, with
    ``sent_gpus`` a pass sent there, at the
    policy's assumed GPU-hours each, over the GPUs that could serve it (the pool's, capped
    by the local quotas over it).  Only what the report says now: its throughput figure
    moves with the clock, this does not."""
    prepared = fleet.clusters[candidate.cluster]
    pool = fleet.pool(candidate.cluster, candidate.pool).pool
    capacity = sum(n.gpus_allocatable for n in pool.nodes)
    for quota in prepared.limits.quotas_for(pool.name):
        if quota.limit_gpus is not None:
            capacity = min(capacity, quota.limit_gpus)
    ahead = prepared.pending_ahead(scopes) + sent_gpus + spec.total_gpus
    model = fleet.policy.queue
    if capacity <= 0:
        return model.max_wait_s
    return min(model.max_wait_s, ahead * model.assumed_job_hours * 3600.0 / capacity)


def queued_after(
    fleet: PreparedFleet, candidates: list[Candidate], spec: WorkloadSpec, scopes: Sequence[str] = ()
) -> list[Candidate]:
    """For a preview: the queues a job that fits nowhere now would wait in, the first the
    one it would be sent to, each with its expected wait (``queue_after_s`` at the broker,
    then the turnover) as its queue-wait term."""
    after = fleet.policy.aging.queue_after_s
    if after is None:
        return []
    return [
        replace(
            c,
            breakdown={**c.breakdown, "queue_wait_s": after + turnover},
            detail={**c.detail, "queued_turnover_s": round(turnover, 1)},
        )
        for turnover, c in by_turnover(fleet, candidates, spec, scopes=scopes)
    ]
