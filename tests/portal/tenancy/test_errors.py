"""Each domain error declares the status, code and field the old error table gave it, so the
API's answers and the pages' words are unchanged by the table's going."""

from __future__ import annotations

import pytest

from accounting.bills.base import BillParseError
from accounting.services.bills import BillRejected
from broker.api.services import IdempotencyKeyReused
from broker.policyrelease.services.releases import ReleaseRefused
from broker.policyrelease.validation import PolicyInvalid, PolicyProblem
from broker.services.notifying.deliveries import PreferenceRefused
from demo.outage import OutageRefused
from broker.services.quota.reservations import QuotaBelowUse
from broker.services.quota.owners import OwnerRefused
from broker.services.quota.requests import OwnRequest, QuotaRequestRefused
from broker.services.submitting.webhook_guard import UnsafeWebhookUrl
from broker.spec import SpecError
from broker.workload_logs import LogQueryError
from portal.identity.services.cluster_identity import IdentityInvalid
from portal.tenancy.refusals import refusal_fields, refusal_text
from portal.tenancy.errors import DomainError

_PROBLEM = PolicyProblem("gpu_classes", 3, "must be a list")
_BILL_LINE = BillParseError("bill.csv", 2, 4, "not a number", "cost")

CASES = [
    # error, status, code, field -> messages
    (SpecError({"name": ["is required"]}), 400, "invalid", {"name": ["is required"]}),
    (LogQueryError({"tail": ["must be a number"]}), 400, "invalid", {"tail": ["must be a number"]}),
    (IdentityInvalid({"posix_user": ["is taken"]}), 400, "invalid", {"posix_user": ["is taken"]}),
    (QuotaBelowUse(used=4, requested=2), 400, "invalid", {"limit_gpus": [str(QuotaBelowUse(used=4, requested=2))]}),
    (QuotaRequestRefused("ends_on", "is past"), 400, "invalid", {"ends_on": ["is past"]}),
    (PreferenceRefused("email", "no address"), 400, "invalid", {"email": ["no address"]}),
    (OwnerRefused("owner", "not a member"), 400, "invalid", {"owner": ["not a member"]}),
    (UnsafeWebhookUrl("a private address"), 400, "invalid", {"webhook_url": ["a private address"]}),
    (PolicyInvalid(_PROBLEM), 400, "invalid", {"content": [str(_PROBLEM)]}),
    (BillRejected("bill.csv", [_BILL_LINE]), 400, "invalid", {"file": [str(_BILL_LINE)]}),
    (IdempotencyKeyReused("another body"), 409, "idempotency_key_reused", {"Idempotency-Key": ["another body"]}),
    (OutageRefused("not simulated"), 409, "refused", {}),
    (ReleaseRefused("state", "is retired"), 409, "refused", {"state": ["is retired"]}),
    (ReleaseRefused("approver", "not you"), 403, "permission_denied", {"approver": ["not you"]}),
    (OwnRequest("you asked for this"), 403, "permission_denied", {}),
]


@pytest.mark.parametrize(("exc", "status", "code", "fields"), CASES, ids=lambda v: type(v).__name__)
def test_each_domain_error_declares_the_status_code_and_field_of_the_old_table(exc, status, code, fields):
    assert isinstance(exc, DomainError)
    assert (exc.status, exc.code, exc.field_messages()) == (status, code, fields)


def test_the_pages_words_name_each_field_or_say_the_message():
    spec = SpecError({"name": ["is required"], "gpus": ["must be positive"]})
    assert refusal_fields(spec) == {"name": ["is required"], "gpus": ["must be positive"]}
    assert refusal_text(spec) == "name: is required; gpus: must be positive"
    assert refusal_fields(OutageRefused("not simulated")) == {"": ["not simulated"]}
    assert refusal_text(OutageRefused("not simulated")) == "not simulated"


def test_located_problems_travel_with_the_error():
    assert PolicyInvalid(_PROBLEM).details == (_PROBLEM,)
    assert BillRejected("bill.csv", [_BILL_LINE]).details == (_BILL_LINE,)
    assert SpecError({"name": ["is required"]}).details == ()
