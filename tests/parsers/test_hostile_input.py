"""Hostile input to the parsers that are neither Slurm's nor Kubernetes' (those are in
test_hostile_slurm.py and test_hostile_kubernetes.py): a clear error or a good result, never
a crash, and nothing stored half-way.  Property-based (hypothesis): random text and JSON, and
*mutations* of real samples (tests/parsers/hostile.py), which reach much deeper than random bytes.

Parsers: the workload spec (broker/spec.py), the policy file, the fleet file, the cloud bills,
and the placement packer (against a brute-force oracle).
"""
from __future__ import annotations

import io
import itertools
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.parsers.hostile import BILL_FIXTURES, DB, FAST, ROOT, hostile_text, json_values, mangled_lines, mutated


# ------------------------------------------------------------------ the workload spec

SPEC_FIELDS = ("project", "name", "command", "gpus_per_worker", "workers", "gpu_class", "gpu_models", "image",
               "min_gpu_memory_gb", "mig_profile", "cpus_per_worker", "memory_gb_per_worker",
               "time_limit_minutes", "data_location", "data_size_gb", "residency", "same_interconnect",
               "priority", "checkpointable")
GOOD_SPEC = {"project": "p", "name": "train", "command": "python train.py", "gpu_class": "a100-80gb",
             "gpus_per_worker": 2, "workers": 2}


@FAST
@given(st.dictionaries(st.sampled_from(SPEC_FIELDS) | st.text(max_size=8), json_values, max_size=10)
       | mutated(GOOD_SPEC))
def test_spec_gives_a_valid_spec_or_names_every_bad_field(data):
    from broker.spec import NAME_RE, SpecError, validate_spec

    try:
        spec = validate_spec(data)
    except SpecError as exc:
        assert exc.errors and all(isinstance(k, str) and v and all(isinstance(m, str) for m in v)
                                  for k, v in exc.errors.items())
        # each error is filed under a field: one of the spec's, or the unknown key given
        assert set(exc.errors) <= set(SPEC_FIELDS) | {str(k) for k in data}, exc.errors
        return
    assert NAME_RE.match(spec.name) and spec.command and spec.project
    assert 1 <= spec.gpus_per_worker <= 16 and 1 <= spec.workers <= 512
    assert spec.priority in ("low", "normal", "high")
    assert validate_spec(spec.to_dict()) == spec          # what is stored reads back the same


@pytest.mark.django_db
@DB
@given(data=mutated(GOOD_SPEC))
def test_a_refused_spec_stores_no_workload_and_no_audit(trio, data):
    from broker.models import AuditRecord, Workload
    from broker.services.fleet.registration import gpu_classes_from_policy
    from broker.services.submitting.workloads import workload_submit
    from broker.spec import SpecError

    gpu_classes_from_policy()
    before = (Workload.objects.count(), AuditRecord.objects.count())
    data = {k: v for k, v in data.items() if k != "project"}
    try:
        workload_submit(user=trio.member, project_id=trio.project.id, spec_data=data)
    except SpecError:
        assert (Workload.objects.count(), AuditRecord.objects.count()) == before
    else:
        assert Workload.objects.count() == before[0] + 1


# ------------------------------------------------------------------ policy and fleet files

POLICY_TEXT = (ROOT / "broker" / "policy" / "default.yaml").read_text()
FLEET_TEXT = (ROOT / "broker" / "fleets" / "demo.yaml").read_text()


def _yaml_mutant(text):
    import yaml

    return mutated(yaml.safe_load(text)).map(lambda d: yaml.safe_dump(d, allow_unicode=True))


@FAST
@given(hostile_text | _yaml_mutant(POLICY_TEXT) | mangled_lines(POLICY_TEXT))
def test_policy_loads_or_names_the_key_at_fault(text):
    from broker.placement.policy import Policy, PolicyError
    from broker.placement.policy_loader import load_policy

    try:
        policy = load_policy(text)
    except PolicyError as exc:
        assert exc.key and str(exc).startswith(f"policy key '{exc.key}': "), str(exc)
        return
    assert isinstance(policy, Policy) and policy.staleness_limit_s >= 1 and policy.reservation_ttl_s >= 1


@pytest.mark.django_db
def test_a_broken_policy_file_stops_with_its_name_and_records_no_version(tmp_path, settings):
    from django.core.exceptions import ImproperlyConfigured

    from broker.models import PolicyVersion
    from broker.services.fleet.policy import current_policy

    bad = tmp_path / "policy.yaml"
    bad.write_text(POLICY_TEXT.replace("staleness_limit_s: 300", "staleness_limit_s: soon"))
    settings.GPUBROKER_POLICY_FILE = bad
    with pytest.raises(ImproperlyConfigured, match="staleness_limit_s"):
        current_policy()
    assert not PolicyVersion.objects.filter(source=str(bad)).exists()


@FAST
@given(hostile_text | _yaml_mutant(FLEET_TEXT) | mangled_lines(FLEET_TEXT))
def test_fleet_file_parses_or_lists_each_problem_with_its_line(text):
    from broker.fleet_file import FleetDescription, FleetError, parse_fleet

    try:
        fleet = parse_fleet(text, source="fuzz.yaml")
    except FleetError as exc:
        assert exc.problems and all(p.key and p.message for p in exc.problems)
        assert str(exc).startswith("invalid fleet file fuzz.yaml:")
        assert all(f"fuzz.yaml:{p.line or '?'}: {p.key}: {p.message}" in str(exc) for p in exc.problems)
        return
    assert isinstance(fleet, FleetDescription)
    assert len({c.name for c in fleet.clusters}) == len(fleet.clusters)


# ------------------------------------------------------------------ cloud bills

def _bill(name: str) -> bytes:
    return (BILL_FIXTURES / name).read_bytes()


BILLS = {"aws": "aws_cur.csv", "gcp": "gcp_billing.csv", "azure": "azure_cost_details.csv"}


@st.composite
def hostile_bill(draw):
    provider = draw(st.sampled_from(sorted(BILLS)))
    raw = _bill(BILLS[provider])
    kind = draw(st.integers(0, 3))
    if kind == 0:
        raw = draw(st.binary(max_size=300))
    elif kind == 1:
        text = raw.decode("utf-8", errors="replace")
        raw = draw(mangled_lines(text)).encode("utf-8", errors="surrogatepass")
    elif kind == 2:
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut] + draw(st.binary(max_size=20)) + raw[cut:]
    return provider, raw


@FAST
@given(hostile_bill())
def test_bill_parses_to_lines_or_errors_with_their_line(bill):
    from accounting.bills import BillParseError, parse_bill

    provider, raw = bill
    outcome = parse_bill(io.BytesIO(raw), provider=provider, file_name="fuzz.csv")
    for err in outcome.errors:
        assert isinstance(err, BillParseError) and err.line >= 0
        assert re.match(rf"fuzz\.csv, line {err.line}(, column \d+( \(.*?\))?)?: .", str(err), re.S), str(err)
    for line in outcome.lines:
        assert line.line_no >= 2
    # a line that failed gives no bill line; the others are not held back by it
    assert not {line.line_no for line in outcome.lines} & {err.line for err in outcome.errors}


def test_a_bad_cost_in_a_bill_names_its_line_and_column_and_keeps_the_other_lines():
    import csv

    from accounting.bills import parse_bill

    raw = _bill(BILLS["aws"]).decode()
    good = parse_bill(io.BytesIO(raw.encode()), provider="aws", file_name="cur.csv")
    rows = list(csv.reader(io.StringIO(raw)))
    column = rows[0].index("line_item_unblended_cost")
    rows[2][column] = "not-a-number"  # the second line item (line 3 of the file)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    outcome = parse_bill(io.BytesIO(out.getvalue().encode()), provider="aws", file_name="cur.csv")
    assert [str(err) for err in outcome.errors] == [
        f"cur.csv, line 3, column {column + 1} (line_item_unblended_cost): bad number 'not-a-number'"]
    assert len(good.lines) == 5 and not good.errors
    assert [line.line_no for line in outcome.lines] == [line.line_no for line in good.lines if line.line_no != 3]


@pytest.mark.django_db
@DB
@given(bill=hostile_bill())
def test_a_rejected_bill_stores_nothing(bill, trio):
    from accounting.models import BillImport, BillLine
    from accounting.services.bills import BillRejected, bill_import
    from broker.models import AuditRecord

    provider, raw = bill
    before = (BillImport.objects.count(), BillLine.objects.count(), AuditRecord.objects.count())
    try:
        result = bill_import(provider=provider, file_name="fuzz.csv", content=io.BytesIO(raw), tenant=trio.tenant)
    except BillRejected as exc:
        assert exc.errors
        assert (BillImport.objects.count(), BillLine.objects.count(), AuditRecord.objects.count()) == before
    else:
        assert result.bill.line_count == BillLine.objects.filter(bill=result.bill).count()


# ------------------------------------------------------------------ the placement packer

free_lists = st.lists(st.integers(0, 16), max_size=9)


@FAST
@given(free_lists, st.integers(1, 16), st.integers(1, 12))
def test_pack_gang_places_every_worker_whole_on_one_node_and_never_overfills(free, g, w):
    from broker.placement.packing import gang_capacity, pack_gang

    placed = pack_gang(free, g, w)
    fits = gang_capacity(free, g) >= w
    assert (placed is not None) == fits
    if placed is not None:
        assert len(placed) == w
        for node, n in itertools.groupby(sorted(placed)):
            assert len(list(n)) * g <= free[node]


def _brute_force_fits(free: list[int], g: int, w: int) -> bool:
    """Try every assignment of workers to nodes (small cases only)."""
    for combo in itertools.combinations_with_replacement(range(len(free)), w):
        use = [0] * len(free)
        for node in combo:
            use[node] += g
        if all(u <= f for u, f in zip(use, free)):
            return True
    return False


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=4), st.integers(1, 8), st.integers(1, 4))
def test_pack_gang_agrees_with_brute_force(free, g, w):
    from broker.placement.packing import pack_gang

    assert (pack_gang(free, g, w) is not None) == _brute_force_fits(free, g, w)


@FAST
@given(st.lists(st.tuples(st.integers(0, 16), st.sampled_from(["", "ib-1", "ib-2"])), min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(1, 8), st.integers(1, 4), st.booleans()), max_size=6))
def test_pool_index_stays_in_step_with_the_nodes_it_hands_out(nodes, gangs):
    from broker.placement.packing import PoolIndex, gang_capacity

    names = [f"n{i}" for i in range(len(nodes))]
    free = [f for f, _ in nodes]
    domains = [d for _, d in nodes]
    index = PoolIndex(names, free, domains)
    for g, w, same in gangs:
        assume(g <= 16)
        assigned = index.assign(g, w, same)
        if assigned is None:
            continue
        assert len(assigned) == w
        if same:
            assert len({domains[i] for i in assigned}) == 1
        for i in assigned:
            free[i] -= g
            assert free[i] >= 0
        index.take(assigned, g)
        assert index.capacity(g, False) == gang_capacity(free, g)
