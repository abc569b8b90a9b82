"""Celery tasks: thin, id-based, idempotent (acks_late), time-limited.

Each calls one service.  The same functions run in-process in the demo
(CELERY_TASK_ALWAYS_EAGER) and from the in-process ticker.  A task acting on one workload
runs its service inside ``workload_bound``, so every line logged meanwhile, here or deep in
the service, carries the workload's id.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from broker.logcontext import workload_bound
from broker.models import Cluster
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing.cycle import workload_place
from broker.services.records import tasks_bridge
from broker.services.placing.cycle import waiting_place_pass
from broker.services.dispatching.send import workload_dispatch
from broker.services.dispatching.chunk import workloads_dispatch
from broker.services.following.status import cluster_poll_status
from broker.services.placing.withdraw import policy_holds_withdraw
from broker.services.placing.moving import queued_moves
from broker.services.placing.preempting import broker_preemption_pass
from broker.services.following.cancel import cancel_propagate
from broker.services.dispatching.multikueue import multikueue_dispatch as dispatch
from broker.services.dispatching.multikueue import dispatcher_managers
from broker.services.following.reconcile import reconcile_fleet
from broker.services.quota.requests import quota_requests_end
from broker.services.notifying.deliveries import notifications_send
from broker.services.notifying.deliveries import retry_delay_s, webhook_attempt
from broker.services.notifying.deliveries import long_waits_notify

# the limits are settings (GPUBROKER_TASK_TIME_LIMIT_S), read when the worker loads the tasks
TASK_OPTIONS = {
    "acks_late": True,
    "time_limit": settings.CELERY_TASK_TIME_LIMIT,
    "soft_time_limit": settings.CELERY_TASK_SOFT_TIME_LIMIT,
}


@shared_task(**TASK_OPTIONS)
def sync_inventory(cluster_id: int) -> None:

    cluster_sync_inventory(cluster_id=cluster_id)


@shared_task(**TASK_OPTIONS)
def sync_all_inventory() -> None:
    for cluster_id in Cluster.objects.filter(enabled=True).values_list("id", flat=True):
        sync_inventory.delay(cluster_id)


@shared_task(**TASK_OPTIONS)
def place_workload(workload_id: int) -> None:

    with workload_bound(workload_id):
        workload_place(workload_id=workload_id)


@shared_task(**TASK_OPTIONS)
def place_waiting() -> None:
    """One pass: the fleet prepared once for every waiting workload (see waiting_place_pass).
    A pass that left due workloads over its limit queues the next one at once: a long queue
    drains at the workers' pace, not one pass per beat."""

    if waiting_place_pass().left_due:
        tasks_bridge.enqueue_place_pass()


@shared_task(**TASK_OPTIONS)
def dispatch_workload(workload_id: int) -> None:

    with workload_bound(workload_id):
        workload_dispatch(workload_id=workload_id)


@shared_task(**TASK_OPTIONS)
def dispatch_workloads(workload_ids: list[int]) -> None:
    """A placing pass's chunk of reserved workloads, dispatched together (one claim, one
    record of the acceptances); see broker.services.dispatching.chunk."""

    workloads_dispatch(workload_ids=workload_ids)


@shared_task(**TASK_OPTIONS)
def poll_status(cluster_id: int) -> None:

    cluster_poll_status(cluster_id=cluster_id)


@shared_task(**TASK_OPTIONS)
def poll_all_status() -> None:
    for cluster_id in Cluster.objects.filter(enabled=True).values_list("id", flat=True):
        poll_status.delay(cluster_id)


@shared_task(**TASK_OPTIONS)
def withdraw_policy_holds() -> None:

    policy_holds_withdraw()


@shared_task(**TASK_OPTIONS)
def move_queued() -> None:

    queued_moves()


@shared_task(**TASK_OPTIONS)
def preempt_for_waiting() -> None:
    """Where the policy makes the broker preemption's owner: room for long-waiting work."""
    broker_preemption_pass()


@shared_task(**TASK_OPTIONS)
def propagate_cancel(workload_id: int) -> None:

    with workload_bound(workload_id):
        cancel_propagate(workload_id=workload_id)


@shared_task(**TASK_OPTIONS)
def multikueue_dispatch(cluster_id: int) -> None:

    dispatch(cluster_id=cluster_id)


@shared_task(**TASK_OPTIONS)
def multikueue_dispatch_all() -> None:
    """The broker as MultiKueue's dispatcher: one pass per manager in dispatcher mode."""

    for cluster_id in dispatcher_managers():
        multikueue_dispatch.delay(cluster_id)


@shared_task(**TASK_OPTIONS)
def reconcile() -> None:

    reconcile_fleet(
        budget_s=settings.GPUBROKER_RECONCILE_BUDGET_S, max_follow_ups=settings.GPUBROKER_RECONCILE_MAX_FOLLOW_UPS
    )


@shared_task(**TASK_OPTIONS)
def end_quota_requests() -> None:

    quota_requests_end()


@shared_task(**TASK_OPTIONS)
def notify_workload_event(workload_id: int, event: str) -> None:

    with workload_bound(workload_id):
        notifications_send(workload_id=workload_id, event=event)


@shared_task(**TASK_OPTIONS)
def deliver_webhook(notification_id: int) -> None:
    """One attempt per run; after a failure the next run is queued with exponential backoff.
    The count lives on the Notification row, so a lost worker does not reset it."""

    failed_attempts = webhook_attempt(notification_id=notification_id)
    if failed_attempts:
        deliver_webhook.apply_async((notification_id,), countdown=retry_delay_s(failed_attempts - 1))


@shared_task(**TASK_OPTIONS)
def notify_long_waits() -> None:

    long_waits_notify()
