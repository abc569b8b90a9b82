"""The typed placement record: rows of every age read, and write back in the stored shape."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from broker.placement.record import Nomination, PlacementRecord, RecordedCandidate, RecordedExclusion, Retry
from broker.placement.results import Candidate, Exclusion, PlacementResult

CANDIDATE = {
    "cluster": "onprem-slurm",
    "pool": "a100",
    "score": 0.125,
    "breakdown": {"queue_wait_s": 0.0, "startup_s": 30.0, "gpu_cost": 4.0, "transfer_cost": 0.0},
    "weighted": {"queue_wait_s": 0.0, "gpu_cost": 0.125},
    "assignment": ["n1", "n2"],
    "gpus_per_worker": 4,
    "detail": {"data_from": "s3-eu", "egress_per_gb": 0.09, "staging_s": 12.0},
}
# what the placing service stored before the record existed (a placed workload, retried once)
TODAYS_ROW = {
    "policy_version": "v7-abc",
    "reason": "",
    "weights": {"queue_wait_s": 1.0, "gpu_cost": 0.5},
    "ranked": [CANDIDATE],
    "excluded": {"cloud-k8s": {"rule": "local_limit", "message": "ClusterQueue cq admits at most 24 GPUs"}},
    "quota_remaining": 24,
    "rejections": {"old-slurm": "QOSMaxGRESPerJob"},
    "burst": "",
    "onprem_wait_s": None,
    "predicted_wait_s": 42.5,
    "retry": {"tries": 1, "at": "2026-12-01T10:00:10+00:00"},
    "chosen": CANDIDATE,
}


def test_a_row_of_todays_shape_reads_typed_and_writes_back_unchanged():
    record = PlacementRecord.from_json(TODAYS_ROW)
    assert record.chosen == RecordedCandidate(
        "onprem-slurm",
        "a100",
        0.125,
        CANDIDATE["breakdown"],
        CANDIDATE["weighted"],
        ("n1", "n2"),
        4,
        CANDIDATE["detail"],
    )
    assert record.candidates == ["onprem-slurm"]
    assert record.excluded["cloud-k8s"] == RecordedExclusion("local_limit", "ClusterQueue cq admits at most 24 GPUs")
    assert record.rejections == {"old-slurm": "QOSMaxGRESPerJob"}
    assert record.predicted_wait_s == 42.5 and record.quota_remaining == 24
    assert record.retry == Retry(1, datetime(2026, 12, 1, 10, 0, 10, tzinfo=timezone.utc))
    assert record.to_json() == TODAYS_ROW


def test_an_older_row_without_the_later_keys_reads_with_defaults():
    old = {
        "policy_version": "v1",
        "ranked": [{"cluster": "a", "pool": "p", "score": 0.5, "breakdown": {"gpu_cost": 1}}],
        "excluded": {"b": {"rule": "stale", "message": "stopped answering"}},
    }
    record = PlacementRecord.from_json(old)
    assert record.ranked[0].weighted == {} and record.ranked[0].assignment == ()
    assert record.ranked[0].gpus_per_worker == 1
    assert record.chosen is None and record.retry is None and record.predicted_wait_s is None
    assert record.rejections == {} and record.excluded["b"].rule == "stale"


@pytest.mark.parametrize("stored", [None, {}, [], "placed", 3])
def test_no_decision_yet_reads_as_an_empty_record(stored):
    record = PlacementRecord.from_json(stored)
    assert record == PlacementRecord()
    assert record.ranked == () and record.excluded == {} and record.chosen is None


def test_malformed_fields_read_as_their_defaults_and_never_raise():
    record = PlacementRecord.from_json(
        {
            "ranked": [{"pool": "no cluster"}, "junk", {"cluster": "a", "score": "high", "gpus_per_worker": 0}],
            "excluded": {"b": "just words"},
            "predicted_wait_s": "5",
            "quota_remaining": True,
            "retry": {"tries": "two", "at": "not a time"},
            "chosen": {},  # what the MultiKueue dispatcher writes while it waits
        }
    )
    assert [c.cluster for c in record.ranked] == ["a"]
    assert record.ranked[0].score == 0.0 and record.ranked[0].gpus_per_worker == 1
    assert record.excluded["b"] == RecordedExclusion("", "just words")
    assert record.predicted_wait_s is None and record.quota_remaining is None
    assert record.retry == Retry(0, None) and record.chosen is None


def test_keys_other_writers_store_are_kept_through_a_rejection():
    row = {**TODAYS_ROW, "manager": "mk-manager", "nomination": {"workers": ["w1"]}, "admission_timeout_s": 300}
    written = PlacementRecord.from_json(row).rejected_by("onprem-slurm", "withdrawn after 30 min").to_json()
    assert written["manager"] == "mk-manager" and written["nomination"] == {"workers": ["w1"]}
    assert written["rejections"] == {"old-slurm": "QOSMaxGRESPerJob", "onprem-slurm": "withdrawn after 30 min"}


def test_each_fruitless_try_doubles_the_pause_up_to_the_cap():
    now = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    record = PlacementRecord()
    first = record.retrying(earlier=None, now=now, first_s=10, cap_s=120)
    assert first.retry == Retry(1, now + timedelta(seconds=10), since=now)
    third = record.retrying(earlier=Retry(2, None), now=now, first_s=10, cap_s=120)
    assert third.retry == Retry(3, now + timedelta(seconds=40), since=now)
    tenth = record.retrying(earlier=Retry(9, None), now=now, first_s=10, cap_s=120)
    assert tenth.retry is not None and tenth.retry.at == now + timedelta(seconds=120)
    assert first.to_json()["retry"] == {
        "tries": 1, "at": "2026-12-01T10:00:10+00:00", "since": "2026-12-01T10:00:00+00:00"}


def test_a_library_decision_records_ranking_exclusions_and_the_chosen_candidate():
    best = Candidate("a", "p", 0.2, {"gpu_cost": 2.0}, {"gpu_cost": 0.2}, ("n1",), 8)
    result = PlacementResult([best], {"b": Exclusion("never_fits", "no pool holds 64 GPUs")}, weights={"gpu_cost": 1})
    record = PlacementRecord.decided(
        result,
        policy_version="v2",
        ranked=[best],
        excluded=result.excluded,
        rejections={},
        predicted_wait_s=0.0,
    ).choosing(best)
    stored = record.to_json()
    assert stored["chosen"] == best.to_dict() and stored["ranked"] == [best.to_dict()]
    assert stored["excluded"] == {"b": {"rule": "never_fits", "message": "no pool holds 64 GPUs"}}
    assert stored["weights"] == {"gpu_cost": 1.0} and stored["policy_version"] == "v2"
    assert PlacementRecord.from_json(stored) == record


def test_the_multikueue_keys_read_typed_and_write_back_as_they_were():
    row = {
        **TODAYS_ROW,
        "manager": "mk-manager",
        "nomination": {"workers": ["w1", "w2"], "clusters": ["k8s-a", "k8s-b"], "at": "2026-12-01T10:00:00+00:00"},
        "admission_timeout_s": 120,
    }
    record = PlacementRecord.from_json(row)
    assert (record.manager, record.nominated_workers, record.admission_timeout_s) == ("mk-manager", ("w1", "w2"), 120.0)
    assert record.to_json() == row


def test_a_row_without_or_with_damaged_multikueue_keys_reads_the_defaults():
    assert (PlacementRecord.from_json({}).manager, PlacementRecord.from_json(None).nominated_workers) == ("", ())
    damaged = PlacementRecord.from_json({"manager": 3, "nomination": "w1", "admission_timeout_s": "soon"})
    assert (damaged.manager, damaged.nominated_workers, damaged.admission_timeout_s) == ("", (), None)


def test_a_multikueue_decision_nominating_its_best_workers_stores_the_nomination_and_reads_it_back():
    now = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    a = Candidate("k8s-a", "p", 0.1, {}, {}, ("n1",), 2)
    b = Candidate("k8s-b", "p", 0.3, {}, {}, ("n9",), 2)
    decision = PlacementRecord.decided(
        PlacementResult([a, b], {}),
        policy_version="v3",
        ranked=[a, b],
        excluded={},
        manager="mgr",
        nominate=2,
        admission_timeout_s=120.0,
    )
    nominated = decision.nominating(
        decision.ranked[:2], Nomination(("w-a", "w-b"), ("k8s-a", "k8s-b"), at=now, previous=())
    )
    stored = nominated.to_json()
    assert stored["chosen"]["cluster"] == "k8s-a" and (stored["manager"], stored["nominate"]) == ("mgr", 2)
    assert stored["nomination"] == {
        "workers": ["w-a", "w-b"],
        "clusters": ["k8s-a", "k8s-b"],
        "at": "2026-12-01T10:00:00+00:00",
        "previous": [],
    }
    read = PlacementRecord.from_json(stored)
    assert read == nominated and read.nominated_workers == ("w-a", "w-b") and read.admission_timeout_s == 120.0


def test_a_multikueue_decision_over_a_waiting_record_keeps_its_nomination_and_chooses_nothing():
    prior = PlacementRecord.from_json(
        {**TODAYS_ROW, "manager": "mgr", "nomination": {"workers": ["w1"], "adopted": True}, "keep": 1}
    )
    decision = PlacementRecord(policy_version="v4", reason="capacity", manager="mgr", nominate=1)
    waiting = decision.over(prior)
    assert waiting.chosen is None and (waiting.policy_version, waiting.reason) == ("v4", "capacity")
    assert waiting.nominated_workers == ("w1",) and waiting.rejections == prior.rejections
    assert waiting.to_json()["nomination"] == {"workers": ["w1"], "adopted": True}
    assert waiting.to_json()["keep"] == 1 and "chosen" not in waiting.to_json()


def test_the_excluded_summary_names_each_cluster_in_order_with_its_message():
    record = PlacementRecord(
        excluded={"b": RecordedExclusion("stale", "old inventory"), "a": RecordedExclusion("health", "down")}
    )
    assert record.excluded_summary() == "a: down; b: old inventory"


def test_a_retry_written_before_the_look_was_kept_reads_without_it_and_writes_back_the_same():
    row = {"tries": 2, "at": "2026-12-01T10:00:20+00:00"}
    retry = Retry.from_json(row)
    assert retry is not None and retry.since is None and retry.to_json() == row


def test_a_workload_waiting_thousands_of_tries_pauses_the_cap_and_does_not_overflow():
    now = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    record = PlacementRecord().retrying(earlier=Retry(5000, None), now=now, first_s=10, cap_s=120)
    assert record.retry is not None and record.retry.tries == 5001 and record.retry.at == now + timedelta(seconds=120)
