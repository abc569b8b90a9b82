"""The fault harness as a Django app, installed only when ``GPUBROKER_DEV_TOOLS`` is on
(config/settings.py): then, and only then, ``manage.py fault_harness`` exists."""

from __future__ import annotations

from django.apps import AppConfig


class FaultsConfig(AppConfig):
    name = "broker.faults"
    label = "faults"
    verbose_name = "Fault harness (development tools)"
