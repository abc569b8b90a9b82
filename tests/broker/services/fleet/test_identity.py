"""Project identity on Slurm: the account is checked, and created on request."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from broker.models import AuditRecord
from broker.services.fleet import identity
from tests.factories import ClusterFactory


@dataclass
class _Status:
    exists: bool
    created: bool = False
    detail: str = ""


class _FakeSlurm:
    """Stands in for SlurmBackend.ensure_account; the real one is exercised against the
    real cluster in tests/broker/backends/slurm/test_integration.py."""

    def __init__(self, known: set[str]):
        self.known = known

    def ensure_account(self, account, users=(), *, create, description, organization):
        if account in self.known:
            return _Status(exists=True)
        if not create:
            return _Status(exists=False, detail="no such account")
        self.known.add(account)
        return _Status(exists=True, created=True)


@pytest.fixture
def slurm_cluster(db, monkeypatch):
    cluster = ClusterFactory(name="hpc", kind="slurm")
    fake = _FakeSlurm({"genomes"})
    monkeypatch.setattr(identity, "backend_for", lambda c: fake)
    return cluster


def test_missing_account_is_reported_and_created_on_request(trio, slurm_cluster):
    checks = {c.account: c for c in identity.slurm_accounts_ensure(create=False)}
    assert checks["lattice"].exists is False and checks["genomes"].exists is True
    checks = {c.account: c for c in identity.slurm_accounts_ensure(create=True)}
    assert checks["lattice"].created is True
    assert AuditRecord.objects.filter(action="identity.slurm_account_created", cluster="hpc").count() == 1
