"""Reading decoded JSON field by field: missing and null read as empty, a wrong type is a
ValueError naming the field, as the backend guard then reports it."""
from __future__ import annotations

import pytest

from broker.backends.guard import GuardedBackend
from broker.backends.base import Unavailable
from broker.backends.json_fields import BadField, Fields, where

NODE = {"metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.count": "8"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "capacity": {"nvidia.com/gpu": "4"}}}


def test_fields_read_what_is_there_and_empty_for_missing_or_null():
    node = Fields(NODE)
    assert node.obj("metadata").text("name") == "gpu-1"
    assert node.obj("metadata").texts("labels") == {"nvidia.com/gpu.count": "8"}
    assert [c.text("type") for c in node.obj("status").objs("conditions")] == ["Ready"]
    assert node.obj("spec").objs("taints") == [] and not node.obj("spec", "template")
    assert Fields({"spec": None}).obj("spec").whole("replicas", 1) == 1
    assert Fields({"n": "12"}).whole("n") == 12 and Fields({"n": 3.0}).whole("n") == 3


@pytest.mark.parametrize(("raw", "read", "message"), [
    ({"status": {"conditions": [None]}}, lambda f: f.obj("status").objs("conditions"),
     "field status.conditions[0]: expected an object, got NoneType None"),
    ({"status": {"conditions": [{"type": 7}]}}, lambda f: f.obj("status").objs("conditions")[0].text("type"),
     "field status.conditions[0].type: expected text, got int 7"),
    ({"spec": {"taints": {"key": "x"}}}, lambda f: f.obj("spec").objs("taints"),
     "field spec.taints: expected a list, got dict {'key': 'x'}"),
    ({"metadata": {"labels": {"nvidia.com/gpu.count": 8}}}, lambda f: f.obj("metadata").texts("labels"),
     "field metadata.labels['nvidia.com/gpu.count']: expected text, got int 8"),
    ({"spec": {"parallelism": True}}, lambda f: f.obj("spec").whole("parallelism"),
     "field spec.parallelism: expected a whole number, got bool True"),
    ({"spec": {"parallelism": "²"}}, lambda f: f.obj("spec").whole("parallelism"),
     "field spec.parallelism: expected a whole number, got str '²'"),
    ({"spec": "x"}, lambda f: f.obj("spec"), "field spec: expected an object, got str 'x'"),
])
def test_a_wrong_type_is_an_error_naming_the_field(raw, read, message):
    with pytest.raises(BadField) as caught:
        read(Fields(raw))
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


def test_the_path_of_an_item_in_a_list_of_nodes_starts_with_the_list():
    assert where(("nodes[2]", "spec", "taints", 0, "effect")) == "nodes[2].spec.taints[0].effect"
    with pytest.raises(BadField, match=r"field nodes\[2\]\.spec: expected an object"):
        Fields({"spec": []}, ("nodes[2]",)).obj("spec")


class _Parser:
    kind, cluster = "kueue", "k8s-a"

    def inventory(self):
        return Fields({"status": {"capacity": []}}).obj("status", "capacity")


def test_the_guard_reports_the_field_as_a_stale_answer_not_a_crash():
    with pytest.raises(Unavailable, match=r"k8s-a: malformed answer to inventory: BadField: field status.capacity: "):
        GuardedBackend(_Parser()).inventory()
