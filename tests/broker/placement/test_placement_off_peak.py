"""Off-peak windows: the window's clock, the policy's sites and rules, and placement."""
from __future__ import annotations

from datetime import datetime, time, timezone

import pytest

from broker.placement.engine import queue_candidates
from broker.placement.off_peak import OffPeak, Window
from broker.placement.policy import PolicyError
from broker.placement.policy_loader import load_policy

# a Wednesday; Berlin is UTC+1 in winter
WED_18_UTC = datetime(2026, 12, 2, 18, 0, tzinfo=timezone.utc)
WED_20_UTC = datetime(2026, 12, 2, 20, 0, tzinfo=timezone.utc)
SAT_NOON_UTC = datetime(2026, 12, 5, 12, 0, tzinfo=timezone.utc)
NIGHT = Window(site="*", start=time(20, 0), end=time(7, 0), timezone="Europe/Berlin")


@pytest.mark.parametrize(("now", "is_open"), [
    (datetime(2026, 12, 2, 18, 59, tzinfo=timezone.utc), False),  # 19:59 in Berlin
    (datetime(2026, 12, 2, 19, 0, tzinfo=timezone.utc), True),  # 20:00 in Berlin
    (datetime(2026, 12, 3, 2, 0, tzinfo=timezone.utc), True),  # past midnight
    (datetime(2026, 12, 3, 6, 0, tzinfo=timezone.utc), False),  # 07:00 in Berlin: closed
])
def test_a_window_past_midnight_is_open_from_its_start_to_its_end_in_the_sites_time_zone(now, is_open):
    assert NIGHT.is_open(now) is is_open


def test_the_next_opening_is_the_start_today_or_tomorrow_in_utc():
    assert NIGHT.opens(WED_18_UTC) == datetime(2026, 12, 2, 19, 0, tzinfo=timezone.utc)
    day = Window(site="*", start=time(9, 0), end=time(17, 0))
    assert day.opens(WED_18_UTC) == datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc)
    assert NIGHT.opens(WED_20_UTC) == WED_20_UTC  # open now


def test_weekends_are_off_peak_all_day_and_the_weekend_opens_at_saturday_midnight():
    weekends = Window(site="*", start=time(20, 0), end=time(7, 0), timezone="Europe/Berlin", weekends=True)
    assert weekends.is_open(SAT_NOON_UTC) and not NIGHT.is_open(SAT_NOON_UTC)
    friday_noon = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    assert weekends.opens(friday_noon) == datetime(2026, 12, 4, 19, 0, tzinfo=timezone.utc)
    all_day = Window(site="*", start=time(0, 0), end=time(0, 0))
    assert all_day.is_open(WED_18_UTC)


def test_the_most_specific_site_wins_and_star_covers_the_rest():
    rule = OffPeak(windows=(NIGHT, Window(site="us", start=time(22, 0), end=time(6, 0), timezone="America/New_York")))
    assert rule.window_for("us-east-1").site == "us"
    assert rule.window_for("eu-west").site == "*"
    assert OffPeak(windows=(Window(site="us", start=time(1, 0), end=time(2, 0)),)).window_for("eu-west") is None


def test_the_policy_requires_off_peak_of_batch_work_above_its_size_only(kit):
    rule = OffPeak(windows=(NIGHT,), required_above_gpus=16)
    assert not rule.applies(kit.spec(workers=2, gpus_per_worker=8))  # 16: not above
    assert rule.applies(kit.spec(workers=4, gpus_per_worker=8))
    assert not rule.applies(kit.spec(workers=4, gpus_per_worker=8, priority="high"))
    assert rule.applies(kit.spec(off_peak=True))
    assert not OffPeak(windows=(NIGHT,)).applies(kit.spec(workers=64, gpus_per_worker=8))


def _policy(kit, windows=(NIGHT,), **kw):
    # these tests read the clock at several moments: inventory never goes stale in them
    return kit.policy(off_peak=OffPeak(windows=windows, **kw), staleness_limit_s=10**9)


def test_an_off_peak_job_waits_before_the_window_and_the_reason_says_when_it_opens(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))], policy=_policy(kit))
    result = kit.place(fleet, kit.spec(off_peak=True), now=WED_18_UTC)
    assert result.ranked == [] and result.reason == "waiting"
    assert result.excluded["a"].rule == "off_peak"
    message = result.excluded["a"].message
    assert "it asked to start off-peak" in message and "20:00-07:00 Europe/Berlin" in message
    assert "opens at 2026-12-02 19:00 UTC, in 1 h 0 min" in message
    assert queue_candidates(fleet, kit.spec(off_peak=True), tenant="t", quota_remaining=100, now=WED_18_UTC) == []


def test_an_off_peak_job_is_placed_once_the_window_opens(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))], policy=_policy(kit))
    assert [c.cluster for c in kit.place(fleet, kit.spec(off_peak=True), now=WED_20_UTC).ranked] == ["a"]


def test_the_window_is_read_per_site_so_an_open_site_takes_the_job_now(kit):
    us = Window(site="us", start=time(0, 0), end=time(0, 0))  # the cloud region: always
    snaps = [kit.snap("eu", kit.pool("eu", [8])), kit.snap("us", kit.pool("us", [8]))]
    facts = [kit.facts("eu", region="eu-west-1"), kit.facts("us", region="us-east-1")]
    result = kit.place(kit.fleet(snaps, facts, _policy(kit, windows=(NIGHT, us))), kit.spec(off_peak=True),
                       now=WED_18_UTC)
    assert [c.cluster for c in result.ranked] == ["us"]
    assert result.excluded["eu"].rule == "off_peak"


def test_a_site_with_no_window_never_starts_off_peak_work_and_says_so(kit):
    only_us = Window(site="us", start=time(20, 0), end=time(7, 0))
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))], policy=_policy(kit, windows=(only_us,)))
    result = kit.place(fleet, kit.spec(off_peak=True), now=WED_18_UTC)
    assert result.excluded["a"].rule == "policy"
    assert "region eu-west-1 has no off-peak window" in result.excluded["a"].message


def test_a_job_that_never_fits_says_so_rather_than_that_it_waits_for_the_window(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8], total=8))], policy=_policy(kit))
    result = kit.place(fleet, kit.spec(off_peak=True, gpus_per_worker=16), now=WED_18_UTC)
    assert result.excluded["a"].rule == "never_fits"


def test_a_large_batch_job_waits_for_the_window_when_the_policy_requires_it_and_says_why(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8, 8, 8]))], policy=_policy(kit, required_above_gpus=16))
    result = kit.place(fleet, kit.spec(workers=3, gpus_per_worker=8), now=WED_18_UTC)
    assert result.excluded["a"].rule == "off_peak"
    assert "the policy starts normal-priority work above 16 GPUs off-peak (24 GPUs)" in result.excluded["a"].message
    assert kit.place(fleet, kit.spec(workers=3, gpus_per_worker=8, priority="high"), now=WED_18_UTC).ranked


def test_work_that_did_not_ask_is_placed_at_peak(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))], policy=_policy(kit))
    assert kit.place(fleet, kit.spec(), now=WED_18_UTC).ranked


_WINDOW = 'off_peak:\n  windows:\n    eu: {start: "20:00", end: "07:00", timezone: Europe/Berlin, weekends: true}\n'


def test_the_policy_file_defines_windows_per_site():
    policy = load_policy(_WINDOW + "  required_above_gpus: 32\n")
    [window] = policy.off_peak.windows
    assert (window.site, window.start, window.end, window.weekends) == ("eu", time(20, 0), time(7, 0), True)
    assert policy.off_peak.required_above_gpus == 32


@pytest.mark.parametrize(("text", "key", "words"), [
    ('off_peak:\n  windows:\n    eu: {start: 20:00, end: "07:00"}\n', "off_peak.windows.eu.start", "in quotes"),
    ('off_peak:\n  windows:\n    eu: {start: "25:00", end: "07:00"}\n', "off_peak.windows.eu.start", "'HH:MM'"),
    ('off_peak:\n  windows:\n    eu: {end: "07:00"}\n', "off_peak.windows.eu.start", "is required"),
    ('off_peak:\n  windows:\n    eu: {start: "20:00", end: "07:00", timezone: Mars/Olympus}\n',
     "off_peak.windows.eu.timezone", "unknown time zone"),
    ('off_peak:\n  windows:\n    eu: {start: "20:00", end: "07:00", days: [mon]}\n', "off_peak.windows.eu.days",
     "unknown key"),
    ("off_peak:\n  required_priorities: [urgent]\n", "off_peak.required_priorities", "must be one of"),
    ("off_peak:\n  required_above_gpus: 1.5\n", "off_peak.required_above_gpus", "whole number"),
])
def test_a_bad_off_peak_policy_names_its_key(text, key, words):
    with pytest.raises(PolicyError) as caught:
        load_policy(text)
    assert caught.value.key == key and words in str(caught.value)
