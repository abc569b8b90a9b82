"""/fleet/ carries its chart history as JSON for the vendored chart library, scoped per user."""
from __future__ import annotations

import json
import re

from django.urls import reverse
from django.utils import timezone

from portal.metrics.services.sampling import fleet_sample_take
from tests.factories import ClusterFactory, GpuPoolFactory


def chart_json(body: str) -> dict:
    match = re.search(r'<script id="fleet-chart-data" type="application/json">(.*?)</script>', body, re.S)
    assert match, "no chart data on the page"
    return json.loads(match.group(1))


def test_fleet_page_without_samples_says_so(trio, login):
    body = login(trio.member).get(reverse("fleet")).content.decode()
    assert "No samples yet" in body and "fleet-chart-data" not in body
    assert "vendor/uplot/uPlot.iife.min.js" in body and "portal/charts.js" in body


def test_fleet_page_charts_capacity_and_only_the_users_queue_figures(trio, login):
    GpuPoolFactory(cluster=ClusterFactory(name="lab"), gpus_total=16, gpus_allocated=4, gpus_idle=12)
    fleet_sample_take(now=timezone.now())
    mine = chart_json(login(trio.member).get(reverse("fleet")).content.decode())
    assert [(c["cluster"], c["resource"], c["total"], c["idle"]) for c in mine["capacity"]] == [
        ("lab", "gpu", [16], [12])]
    assert [w["tenant"] for w in mine["waits"]] == ["physics"]
    theirs = chart_json(login(trio.outsider).get(reverse("fleet")).content.decode())
    assert [w["tenant"] for w in theirs["waits"]] == ["biology"]


def test_the_live_refresh_partial_carries_no_charts(trio, login):
    fleet_sample_take(now=timezone.now())
    partial = login(trio.member).get(reverse("fleet"), HTTP_HX_REQUEST="true").content.decode()
    assert "fleet-chart-data" not in partial and "<html" not in partial
