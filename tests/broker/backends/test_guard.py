"""A malformed answer from a control plane makes the cluster stale, not a crashed task."""
from __future__ import annotations

import pytest

from broker.backends.base import Unavailable
from broker.backends.guard import GuardedBackend
from broker.models import Cluster


class _Garbled:
    kind, cluster = "test", "garbled"

    def inventory(self):
        return None.pools  # what a parser does with a null it did not expect

    def usage(self, since):
        yield 1
        raise TypeError("bad row")

    def ensure_account(self, account):
        return account


def test_parser_crash_becomes_unavailable_and_other_calls_pass_through():
    backend = GuardedBackend(_Garbled())
    with pytest.raises(Unavailable, match="malformed answer to inventory"):
        backend.inventory()
    usage = backend.usage(None)
    assert next(usage) == 1
    with pytest.raises(Unavailable, match="malformed usage record"):
        next(usage)
    assert backend.ensure_account("x") == "x"


def test_malformed_inventory_marks_the_cluster_stale(make_cluster, monkeypatch):
    from broker.backends import registry
    from broker.services.fleet.inventory import cluster_sync_inventory

    cluster = make_cluster("onprem")
    monkeypatch.setitem(registry._BUILDERS, "simulator", lambda c: _Garbled())
    assert cluster_sync_inventory(cluster_id=cluster.id).health == "stale"
    assert "malformed answer" in Cluster.objects.get(id=cluster.id).last_error
