from broker.models.fleet import (
    POOL_REPORT_FIELDS,
    BeatLease,
    Cluster,
    ClusterHealth,
    ClusterKind,
    GpuClass,
    GpuPool,
    Location,
)
from broker.models.notification import Channel, DeliveryState, Notification, NotificationPreference
from broker.models.quota import Quota, Reservation, ReservationState
from broker.models.quota_request import QuotaRequest, QuotaRequestState
from broker.models.replay import ReplayEstimate, SimulatorCalibration
from broker.models.workload import (
    AuditRecord,
    DispatchAttempt,
    AttemptState,
    Escalation,
    EscalationKind,
    EscalationState,
    PolicyVersion,
    ReconcileRun,
    Workload,
    WorkloadState,
)

__all__ = [
    "AttemptState",
    "AuditRecord",
    "Channel",
    "DeliveryState",
    "Notification",
    "NotificationPreference",
    "BeatLease",
    "Cluster",
    "ClusterHealth",
    "ClusterKind",
    "DispatchAttempt",
    "Escalation",
    "EscalationKind",
    "EscalationState",
    "GpuClass",
    "GpuPool",
    "POOL_REPORT_FIELDS",
    "Location",
    "PolicyVersion",
    "Quota",
    "QuotaRequest",
    "QuotaRequestState",
    "ReconcileRun",
    "ReplayEstimate",
    "SimulatorCalibration",
    "Reservation",
    "ReservationState",
    "Workload",
    "WorkloadState",
]
