"""The YAML policy loader: the shipped default loads, and errors name the key."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from broker.placement import Policy, PolicyError, load_policy, load_policy_file, policy_version

DEFAULT = Path(__file__).resolve().parents[3] / "broker" / "policy" / "default.yaml"

MINIMAL = """
preset: cost
gpu_classes:
  h100: {models: ["NVIDIA H100 80GB HBM3"], min_memory_gb: 80}
tenants:
  "*": {gpu_classes: ["*"]}
"""


def test_default_policy_loads():
    text = DEFAULT.read_text()
    policy = load_policy_file(str(DEFAULT))
    assert set(policy.gpu_classes) == {"a100-80gb", "a100-40gb", "h100", "l4", "t4"}
    assert policy.preset == "on-prem-first"
    assert policy.staleness_limit_s == 300 and policy.reservation_ttl_s == 600
    assert policy.tenant("anyone").allows_class("t4")
    assert policy.tenant("physics").min_share > 0 and policy.tenant("physics").burst_gpus > 0
    assert policy.version == hashlib.sha256(text.encode()).hexdigest()[:12]
    assert policy.gpu_classes["a100-80gb"].includes("NVIDIA A100-SXM4-80GB", 80)
    assert not policy.gpu_classes["a100-80gb"].includes("A100", 40)


def test_policy_version_is_sha256_prefix():
    assert policy_version("a") == hashlib.sha256(b"a").hexdigest()[:12]
    assert len(policy_version(MINIMAL)) == 12
    assert policy_version(MINIMAL) != policy_version(MINIMAL + "\n# edit")


def test_minimal_policy_and_defaults():
    policy = load_policy(MINIMAL)
    assert policy.preset == "cost" and policy.weights["gpu_cost"] == 4.0
    assert policy.preferred_location is None
    assert load_policy("").tenant("x").allows_class("anything")  # empty: allow all


@pytest.mark.parametrize("text, key", [
    ("bogus: 1", "bogus"),
    ("preset: cheapest", "preset"),
    ("staleness_limit_s: -5", "staleness_limit_s"),
    ("staleness_limit_s: soon", "staleness_limit_s"),
    ("reservation_ttl_s: true", "reservation_ttl_s"),
    ("weights: {speed: 1}", "weights.speed"),
    ("weights: {gpu_cost: -1}", "weights.gpu_cost"),
    ("gpu_classes: {h100: {min_memory_gb: 80}}", "gpu_classes.h100.models"),
    ("gpu_classes: {h100: {models: []}}", "gpu_classes.h100.models"),
    ("gpu_classes: {h100: {models: [H100], colour: red}}", "gpu_classes.h100.colour"),
    ("gpu_classes: [h100]", "gpu_classes"),
    ("tenants: {lab: {gpu_classes: [h200]}}", "tenants.lab.gpu_classes"),
    ("tenants: {lab: {min_share: 2}}", "tenants.lab.min_share"),
    ("tenants: {lab: {regions: {eu: 1}}}", "tenants.lab.regions"),
    ("queue: {max_wait_s: 0}", "queue.max_wait_s"),
    ("aging: {hold_after: 5}", "aging.hold_after"),
    ("aging: {move_past_queue_after_s: -1}", "aging.move_past_queue_after_s"),
    ("aging: {move_past_queue_after_s: later}", "aging.move_past_queue_after_s"),
    ("aging: {max_moves: -1}", "aging.max_moves"),
    ("aging: {max_moves: 1.5}", "aging.max_moves"),
    ("prefer_location: mars", "prefer_location"),
    ("[1, 2]", "(file)"),
    ("a: [", "(file)"),
])
def test_loader_errors_name_the_key(text, key):
    with pytest.raises(PolicyError) as info:
        load_policy(text)
    assert info.value.key == key
    assert f"'{key}'" in str(info.value)


def test_policy_dataclass_validates_preset_and_weights():
    with pytest.raises(PolicyError, match="preset"):
        Policy(preset="nope")
    with pytest.raises(PolicyError, match="weights.bogus"):
        Policy(weight_overrides={"bogus": 1.0})


def test_tenant_fallbacks():
    policy = load_policy("tenants: {lab: {gpu_classes: ['*'], regions: [eu]}}")
    assert policy.tenant("lab").allows_region("eu-west-1")
    assert not policy.tenant("lab").allows_region("us-east-1")
    assert not policy.tenant("other").allows_class("h100")  # no "*" entry: deny
