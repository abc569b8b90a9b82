"""The synthetic mix and the preparation of jobs: what is replayed, and how."""
from __future__ import annotations

import pytest

from broker.placement import load_policy_file
from broker.replay.gpu_map import UNCONSTRAINED_CLASS, UnknownGpuType, class_for
from broker.replay.jobs import TimeOptions, prepare
from broker.replay.synth import SynthOptions, synthesize
from broker.replay.trace import parse_trace
from tests.broker.replay.conftest import HEADER

POLICY = load_policy_file("broker/policy/default.yaml")


def rows(*lines: str):
    return parse_trace([HEADER, *lines])


def single_gpu_trace(n: int):
    return rows(*(f"j{i},{i * 10},,,1,1,100,Running" for i in range(n)))


def test_gpu_types_map_to_policy_classes_and_alternatives_keep_the_widest():
    assert class_for(()) == UNCONSTRAINED_CLASS == "a100-40gb"
    assert class_for(("T4",)) == "l4" and class_for(("G2",)) == "a100-80gb"
    assert class_for(("A10", "T4")) == "l4"
    assert class_for(("G2", "P100", "T4")) == "a100-40gb"  # served by the most clusters
    with pytest.raises(UnknownGpuType):
        class_for(("K80",))


def test_skipped_rows_are_counted_and_time_is_rebased_compressed_and_capped():
    trace = rows("cpu,100,,,0,1,50,Running", "pending,110,,T4,1,1,,Pending",
                 "odd,120,,K80,1,1,50,Running", "long,130,,G2,2,1,999999,Running",
                 "short,200,,,1,1,30,Failed")
    jobs, skipped = prepare(trace, POLICY.gpu_classes,
                            TimeOptions(time_compress=10, max_duration_s=3600))
    assert (skipped.cpu_only, skipped.no_duration, dict(skipped.unknown_gpu)) == (1, 1, {"K80": 1})
    assert [(j.key, j.submit_s, j.duration_s) for j in jobs] == [("long", 3.0, 3600.0),
                                                                 ("short", 10.0, 30.0)]
    assert skipped.capped == 1
    assert jobs[0].gpu_class == "a100-80gb" and jobs[0].min_memory_gb == 80
    assert jobs[1].final_state.value == "failed"


def test_spec_of_a_job_is_valid_with_a_whole_hour_limit():
    jobs, _ = prepare(rows("Pod_A.1,0,,,4,2,5000,Running"), POLICY.gpu_classes, TimeOptions())
    spec = jobs[0].spec_data()
    assert spec["name"] == "pod-a-1" and spec["time_limit_minutes"] == 120
    assert (spec["gpus_per_worker"], spec["workers"]) == (4, 2)


def test_same_seed_same_mix_other_seed_other_mix():
    trace = single_gpu_trace(300)
    first, report = synthesize(trace, SynthOptions(seed=7))
    again, _ = synthesize(trace, SynthOptions(seed=7))
    other, _ = synthesize(trace, SynthOptions(seed=8))
    assert first == again and first != other
    assert report.seed == 7 and report.tenants_added == 300 and 10 <= report.gangs_added <= 60
    assert {r.tenant for r in first} <= {f"t{i}" for i in range(1, 7)}
    assert all(r.workers * r.gpus_per_worker <= 16 for r in first)


def test_a_limited_run_replays_a_prefix_of_the_full_run():
    full, _ = synthesize(single_gpu_trace(200), SynthOptions(seed=3))
    prefix, _ = synthesize(single_gpu_trace(50), SynthOptions(seed=3))
    assert prefix == full[:50]


def test_gangs_are_not_added_to_a_trace_that_has_its_own_and_tenants_are_kept():
    trace = rows("a,0,App_7,,1,1,10,Running", "b,1,,,2,4,10,Running")
    out, report = synthesize(trace, SynthOptions(seed=1, gang_fraction=1.0))
    assert report.gangs_added == 0 and report.gang_fraction == 0
    assert out[0].tenant == "app-7" and out[0].workers == 1 and out[1].tenant.startswith("t")


def test_options_are_checked():
    with pytest.raises(ValueError):
        SynthOptions(gang_fraction=1.5)
    with pytest.raises(ValueError):
        TimeOptions(time_compress=0)
