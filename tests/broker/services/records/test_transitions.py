"""The lifecycle table, walked: every listed move happens, every other one is refused."""
from __future__ import annotations

from datetime import timedelta
from itertools import product

import pytest
from django.utils import timezone

from broker.lifecycle import TABLES, TransitionReason
from broker.models import (AuditRecord, DispatchAttempt, Escalation, Notification, QuotaRequest, Reservation,
                           Workload)
from broker.policyrelease.models import ImpactReplay, PolicyRelease
from broker.services.records.transitions import Note, TransitionRefused, transition
from tests.factories import ClusterFactory, QuotaFactory, UserFactory, WorkloadFactory

MODELS = {"broker.Workload": Workload, "broker.Reservation": Reservation,
          "broker.DispatchAttempt": DispatchAttempt, "broker.Escalation": Escalation,
          "broker.QuotaRequest": QuotaRequest, "broker.Notification": Notification,
          "policyrelease.PolicyRelease": PolicyRelease, "policyrelease.ImpactReplay": ImpactReplay}
PAIRS = [(label, before, after) for label, table in TABLES.items()
         for before, after in product(table, repeat=2)]


def _row(label: str, state: str):
    workload = WorkloadFactory(state=state if label == "broker.Workload" else "queued")
    cluster = ClusterFactory(name="onprem")
    if label == "broker.Workload":
        return workload
    if label == "broker.Reservation":
        return Reservation.objects.create(workload=workload, tenant=workload.tenant, gpu_class=workload.gpu_class,
                                          cluster=cluster, gpus=2, state=state,
                                          expires_at=timezone.now() + timedelta(minutes=5))
    if label == "broker.DispatchAttempt":
        return DispatchAttempt.objects.create(workload=workload, cluster=cluster, number=1, state=state)
    if label == "broker.QuotaRequest":
        quota = QuotaFactory(tenant=workload.tenant, gpu_class=workload.gpu_class)
        return QuotaRequest.objects.create(quota=quota, project=workload.project, requester=UserFactory(),
                                           extra_gpus=2, reason="a deadline", ends_on=timezone.now().date(),
                                           state=state)
    if label == "broker.Notification":
        return Notification.objects.create(user=UserFactory(), workload=workload, event="running", channel="email",
                                           target="ada@example.org", body="it runs", state=state)
    if label.startswith("policyrelease."):
        release = PolicyRelease.objects.create(number=1, content="x", version="v1",
                                               state=state if label.endswith("PolicyRelease") else "draft")
        if label.endswith("PolicyRelease"):
            return release
        return ImpactReplay.objects.create(release=release, state=state)
    return Escalation.objects.create(kind="unclear", key=f"k-{workload.uid}", cluster=cluster, evidence={},
                                     state=state)


@pytest.mark.django_db
@pytest.mark.parametrize(("label", "before", "after"), PAIRS, ids=[f"{k}:{b}->{a}" for k, b, a in PAIRS])
def test_every_listed_transition_moves_and_every_other_is_refused(label, before, after):
    row = _row(label, before)
    model = MODELS[label]
    if after in TABLES[label][before]:
        moved = transition(model, row.pk, to=after, from_=(before,), reason=TransitionReason.PLACED, note=None)
        assert moved == 1
    else:
        with pytest.raises(TransitionRefused):
            transition(model, row.pk, to=after, from_=(before,), reason=TransitionReason.PLACED, note=None)
    row.refresh_from_db()
    assert row.state == (after if after in TABLES[label][before] else before)


def test_every_state_of_every_model_is_in_its_table():
    for label, model in MODELS.items():
        assert set(model._meta.get_field("state").choices) >= {(s, s.label) for s in TABLES[label]}
        assert {value for value, _ in model._meta.get_field("state").choices} == set(TABLES[label])


@pytest.mark.django_db
def test_a_row_someone_else_moved_first_is_left_alone_and_recorded_nowhere():
    workload = WorkloadFactory(state="queued")
    note = Note(action="workload.running", workload=workload)
    assert transition(Workload, workload.pk, to="running", reason=TransitionReason.STARTED_AT_DESTINATION,
                      note=note) == 1
    assert transition(Workload, workload.pk, to="running", reason=TransitionReason.STARTED_AT_DESTINATION,
                      note=note) == 0
    records = AuditRecord.objects.filter(workload=workload, action="workload.running")
    assert [r.inputs["transition"] for r in records] == [{"to": "running", "reason": "started_at_destination"}]


@pytest.mark.django_db
def test_effects_of_a_move_run_before_its_record_and_only_when_it_moved():
    workload = WorkloadFactory(state="running")
    seen: list[int] = []
    for _ in range(2):
        transition(Workload, workload.pk, to="completed", reason=TransitionReason.ENDED_AT_DESTINATION,
                   then=lambda: seen.append(AuditRecord.objects.count()),
                   note=Note(action="workload.completed", workload=workload))
    assert seen == [0] and AuditRecord.objects.filter(action="workload.completed").count() == 1


def test_a_transition_without_a_row_to_move_is_refused():
    with pytest.raises(TransitionRefused):
        transition(Workload, to="running", reason=TransitionReason.STARTED_AT_DESTINATION, note=None)
