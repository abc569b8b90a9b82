"""Hostile input to every parser: a clear error or a good result, never a crash, and nothing
stored half-way.  Property-based (hypothesis): random text and JSON, and *mutations* of
real samples (one value somewhere replaced by something of the wrong type, a key dropped,
a line cut), which reach much deeper than random bytes.

Parsers: the workload spec (broker/spec.py), the policy file, the fleet file, Slurm's
squeue / sacct / scontrol text and REST JSON, sacct usage files (accounting/sacct.py),
Kubernetes objects (nodes, pods, Jobs, Kueue Workloads, Volcano jobs), the cloud bills,
and the placement packer (against a brute-force oracle).
"""
from __future__ import annotations

import copy
import io
import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SLURM_FIXTURES = ROOT / "tests" / "broker" / "backends" / "slurm" / "fixtures"
BILL_FIXTURES = ROOT / "tests" / "accounting" / "fixtures"
# CI: the same examples every run (derandomised); a deeper, random search:
#   GPUBROKER_FUZZ_RANDOM=1 GPUBROKER_FUZZ_EXAMPLES=2000 pytest tests/parsers
_RANDOM = bool(os.environ.get("GPUBROKER_FUZZ_RANDOM"))
_N = int(os.environ.get("GPUBROKER_FUZZ_EXAMPLES", "120"))
FAST = settings(max_examples=_N, deadline=None, derandomize=not _RANDOM, database=None,
                suppress_health_check=[HealthCheck.too_slow])
DB = settings(max_examples=max(10, _N // 3), deadline=None, derandomize=not _RANDOM, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


scalars = (st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=True)
           | st.text(max_size=30) | st.sampled_from(["", "N/A", "(null)", "-1", "1e309", "0x1f", "\x00", "∞",
                                                    "2024-13-45T99:99:99", "gpu:a100:x", "gres/gpu=-3"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
hostile_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=400) | st.sampled_from([
    "\x1f" * 40, "|" * 30, "a|b\n" * 5, "NodeName= Gres=gpu:::: State=???", "\ufeff\x00\r\n\r\n"])


# ------------------------------------------------------------------ mutation of real samples

def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated(draw, sample):
    """``sample`` with one to three values replaced by hostile JSON, or their keys dropped."""
    obj = copy.deepcopy(sample)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = draw(json_values)
    return obj


@st.composite
def mangled_lines(draw, text: str):
    """Real text with lines cut short, duplicated, or given a hostile field."""
    lines = text.splitlines()
    out = []
    for line in lines:
        choice = draw(st.integers(0, 5))
        if choice == 0 and line:
            out.append(line[: draw(st.integers(0, len(line)))])
        elif choice == 1:
            out.append(line + draw(st.sampled_from(["|", "\x1f", "|x|y", "=", " Gres=gpu:a100:-1"])))
        elif choice == 2:
            out.append(draw(hostile_text))
        else:
            out.append(line)
    return "\n".join(out)


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
        assert exc.key and str(exc).startswith("policy key")
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
        assert "fuzz.yaml" in str(exc)
        return
    assert isinstance(fleet, FleetDescription)
    assert len({c.name for c in fleet.clusters}) == len(fleet.clusters)


# ------------------------------------------------------------------ Slurm text and JSON

def _fixture(name: str) -> str:
    return (SLURM_FIXTURES / name).read_text()


@FAST
@given(hostile_text | mangled_lines(_fixture("squeue-O-us.txt")) | mangled_lines(_fixture("squeue.txt")))
def test_squeue_output_gives_jobs_or_skips_the_line(text):
    from broker.backends.slurm import parsers

    for delimiter in (parsers.US, "|"):
        for job in parsers.parse_squeue(text, delimiter=delimiter):
            assert isinstance(job.job_id, str) and job.num_nodes >= 0 or job.num_nodes < 0
            parsers.map_job_state(job.state)
            parsers.tres_gpus(job.tres)


def test_a_cut_squeue_line_is_skipped_and_every_other_job_still_read():
    from broker.backends.slurm import parsers

    lines = _fixture("squeue-O-us.txt").splitlines()
    every = [job.job_id for job in parsers.parse_squeue("\n".join(lines), delimiter=parsers.US)]
    lines[1] = lines[1][:5]  # the second job's line, cut short
    assert [job.job_id for job in parsers.parse_squeue("\n".join(lines), delimiter=parsers.US)] == [
        job_id for job_id in every if job_id != every[1]
    ]


def test_a_garbled_sacct_line_is_skipped_and_every_other_record_still_read():
    from broker.backends.slurm import parsers

    text = _fixture("sacct-P-X.txt")
    every = [rec.job_id for rec in parsers.parse_sacct_table(text)]
    lines = text.splitlines()
    lines[1] = "not|a|sacct|line"
    assert [rec.job_id for rec in parsers.parse_sacct_table("\n".join(lines))] == every[1:]


@FAST
@given(hostile_text | mangled_lines(_fixture("sacct-us.txt")) | mangled_lines(_fixture("sacct-P-X.txt")))
def test_sacct_lines_give_records_or_are_skipped(text):
    from broker.backends.slurm import parsers

    for line in text.splitlines():
        rec = parsers.parse_sacct_line(line)
        assert rec is None or isinstance(rec.job_id, str)
    for rec in parsers.parse_sacct_table(text):
        assert isinstance(rec.elapsed_s, int)


@FAST
@given(hostile_text | mangled_lines(_fixture("sacct-P-X.txt")))
def test_sacct_usage_file_gives_records_or_says_what_is_missing(text):
    from accounting.sacct import iter_sacct_usage

    try:
        records = list(iter_sacct_usage(text.splitlines(), cluster="hpc"))
    except ValueError as exc:
        assert "sacct output lacks" in str(exc)
        return
    for r in records:
        assert r.gpus > 0 and r.gpu_seconds >= 0


def test_a_bad_time_in_a_usage_file_skips_its_line_names_it_and_keeps_the_rest():
    from accounting.sacct import iter_sacct_usage

    lines = _fixture("sacct-P-X.txt").splitlines()
    good = list(iter_sacct_usage(lines, cluster="hpc"))
    row = next(i for i, line in enumerate(lines) if line.startswith(f"{good[0].job_id}|"))
    cols = lines[row].split("|")
    cols[lines[0].split("|").index("End")] = "2024-13-45T99:99:99"
    lines[row] = "|".join(cols)
    problems: list = []
    records = list(iter_sacct_usage(lines, cluster="hpc", problems=problems))
    assert [r.job_id for r in records] == [r.job_id for r in good[1:]]
    assert [str(p) for p in problems] == [f"line {row + 1}: End '2024-13-45T99:99:99' is not readable"]


@FAST
@given(hostile_text | mangled_lines(_fixture("scontrol-show-node.txt")) | mangled_lines(
    _fixture("scontrol-show-node-d.txt")))
def test_scontrol_nodes_parse_whatever_the_text(text):
    from broker.backends.slurm import parsers

    for node in parsers.parse_scontrol_nodes(text):
        parsers.node_health(node)
        parsers.gpu_items(node.gres)


def _json_sample(name: str, key: str) -> dict:
    import json

    items = json.loads(_fixture(name))[key]
    return items[0]


@FAST
@given(st.data())
@example(data=None)
def test_slurm_rest_json_records_read_or_fail_clearly(data):
    from broker.backends.slurm import json_records

    if data is None:   # the explicit example: an allocation list holding null
        _clear(json_records.acct_from_json, {"job_id": 1, "tres": {"allocated": [None]}})
        return
    reader, sample = data.draw(st.sampled_from([
        (json_records.job_from_json, _json_sample("rest-jobs.json", "jobs")),
        (json_records.node_from_json, _json_sample("sinfo.json", "nodes")),
        (json_records.acct_from_json, _json_sample("rest-slurmdb-jobs.json", "jobs")),
    ]))
    obj = data.draw(mutated(sample))
    _clear(reader, obj)


def _keys(value) -> set[str]:
    """Every key of every mapping in a JSON-like value (the fields an error can name)."""
    if isinstance(value, dict):
        return {str(k) for k in value} | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _clear(fn, *args):
    """fn(*args) returns, or raises an error that names what is wrong: a field of the input
    (any key of it, or the input itself when it is a bare value), never a bare
    AttributeError/KeyError/IndexError from deep inside."""
    from broker.backends.base import BackendError

    try:
        return fn(*args)
    except (BackendError, ValueError) as exc:
        message = str(exc)
        named = {k for a in args for k in _keys(a) if len(k) > 1} | {repr(a) for a in args} | {str(a) for a in args}
        assert any(name in message for name in named), f"{message!r} names no field of the input"
        return None


# ------------------------------------------------------------------ Kubernetes objects

def _k8s_node() -> dict:
    return {"metadata": {"name": "gpu-1", "labels": {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.count": "8", "nvidia.com/mig.strategy": "mixed"}},
        "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]},
        "status": {"capacity": {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "7", "cpu": "64"},
                   "allocatable": {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "7"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _k8s_pod() -> dict:
    return {"metadata": {"name": "p"}, "spec": {"nodeName": "gpu-1", "containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}, "status": {"phase": "Running"}}


def _kueue_job() -> dict:
    return {"metadata": {"name": "wl-abc-train", "namespace": "lattice", "uid": "u1",
                         "labels": {"gpubroker.io/workload": "wl-abc"}},
            "spec": {"parallelism": 2, "template": {"spec": {"containers": [
                {"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}},
            "status": {"conditions": [{"type": "Complete", "status": "False"}], "startTime": "2026-01-01T00:00:00Z"}}


def _kueue_workload() -> dict:
    return {"metadata": {"name": "job-wl", "ownerReferences": [{"uid": "u1"}]},
            "spec": {"podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [
                {"resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                       "message": "couldn't assign flavors: insufficient unused quota"}],
                       "admission": {"podSetAssignments": [{"count": 2, "flavors": {"nvidia.com/gpu": "a100"},
                                                            "resourceUsage": {"nvidia.com/gpu": "4"}}]}}}


def _vcjob() -> dict:
    return {"metadata": {"name": "wl-abc", "namespace": "lattice"},
            "spec": {"minAvailable": 2, "queue": "default", "tasks": [{"replicas": 2, "template": {"spec": {
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}]},
            "status": {"state": {"phase": "Running", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}


@FAST
@given(st.data())
def test_kubernetes_nodes_and_pods_give_pools_or_fail_clearly(data):
    from broker.backends.kube.common import BackendSettings
    from broker.backends.kube.inventory import build_pools, product_namer

    nodes = [data.draw(mutated(_k8s_node())) for _ in range(data.draw(st.integers(1, 3)))]
    pods = [data.draw(mutated(_k8s_pod())) for _ in range(data.draw(st.integers(0, 3)))]
    pools = _clear(build_pools, nodes, pods, BackendSettings(), "kueue", product_namer)
    for pool in pools or ():
        for n in pool.nodes:
            assert n.gpus_total > 0


@FAST
@given(st.data())
def test_kueue_and_volcano_objects_give_a_state_or_fail_clearly(data):
    from broker.backends.kube import kueue, volcano

    job, wl = data.draw(mutated(_kueue_job())), data.draw(mutated(_kueue_workload()))
    _clear(kueue.kueue_state, job, wl)
    _clear(kueue.job_gpus, job)
    _clear(kueue.workload_gpus, wl)
    vc = data.draw(mutated(_vcjob()))
    _clear(volcano.vcjob_gpus, vc)
    _clear(volcano.gang_reason, data.draw(mutated({"status": {"phase": "Pending", "conditions": [
        {"type": "Unschedulable", "status": "True", "message": "2/4 tasks in gang unschedulable"}]}})),
        data.draw(st.sampled_from(["Open", "Closed", ""])), "default")


@FAST
@given(json_values)
@example(value="1e309")
def test_kubernetes_quantities_and_times(value):
    from broker.backends.kube.common import parse_time, quantity

    _clear(quantity, value)
    if isinstance(value, str) or value is None:
        _clear(parse_time, value)


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
        assert isinstance(err, BillParseError) and str(err) and err.line >= 0
    for line in outcome.lines:
        assert line.line_no >= 2


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
