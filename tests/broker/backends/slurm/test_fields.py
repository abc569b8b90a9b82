"""Unknown Slurm fields: strict mode (these tests) fails, lenient mode (production) keeps
the raw text, logs the field once and carries on."""
from __future__ import annotations

import logging
import uuid

import pytest

from broker.backends.guard import GuardedBackend
from broker.backends.slurm import SlurmBackend, fields, json_records, parsers
from broker.backends.slurm.fields import UnknownField, strict_fields

from .support import read_fixture, read_json_fixture

NODE_LINE = read_fixture("scontrol-show-node.txt").splitlines()[0]


def new_name() -> str:
    # a fresh field name per test: "logged once" is per process
    return "NewField" + uuid.uuid4().hex[:8]


def test_tests_read_slurm_strictly():
    assert fields.is_strict()


def test_unknown_scontrol_key_fails_in_strict_mode():
    name = new_name()
    with pytest.raises(UnknownField) as info:
        parsers.parse_scontrol_nodes(f"{NODE_LINE} {name}=42")
    assert (info.value.source, info.value.name, info.value.raw) == ("scontrol node", name, "42")
    assert "known_fields.py" in str(info.value)


def test_unknown_scontrol_key_is_kept_and_logged_once_in_production(caplog):
    name = new_name()
    with strict_fields(False), caplog.at_level(logging.WARNING, logger=fields.__name__):
        first = parsers.parse_scontrol_nodes(f"{NODE_LINE} {name}=a b")[0]
        second = parsers.parse_scontrol_nodes(f"{NODE_LINE} {name}=c")[0]
    assert first.extra == {name: "a b"} and second.extra == {name: "c"}
    assert first.name == "n1" and parsers.tres_gpus(first.cfg_tres) == 8   # the rest is read
    warnings = [r for r in caplog.records if name in r.getMessage()]
    assert len(warnings) == 1 and "scontrol node" in warnings[0].getMessage()


@pytest.mark.parametrize("reader,sample,key", [
    (json_records.job_from_json, "rest-jobs.json", "jobs"),
    (json_records.node_from_json, "sinfo.json", "nodes"),
    (json_records.acct_from_json, "sacct.json", "jobs"),
])
def test_unknown_json_member_strict_and_lenient(reader, sample, key):
    obj = dict(read_json_fixture(sample)[key][0])
    name = new_name()
    obj[name] = {"set": True, "number": 3}
    with pytest.raises(UnknownField):
        reader(obj)
    with strict_fields(False):
        rec = reader(obj)
    assert rec.extra == {name: '{"number":3,"set":true}'}


def test_unknown_member_of_a_nested_accounting_object():
    obj = dict(read_json_fixture("sacct.json")["jobs"][0])
    name = new_name()
    obj["time"] = {**obj["time"], name: 1}
    with pytest.raises(UnknownField):
        json_records.acct_from_json(obj)
    with strict_fields(False):
        assert json_records.acct_from_json(obj).extra == {f"time.{name}": "1"}


def test_unknown_sacct_column():
    name = new_name()
    text = f"JobID|JobName|{name}\n7|wl-x|v\n"
    with pytest.raises(UnknownField):
        parsers.parse_sacct_table(text)
    with strict_fields(False):
        (rec,) = parsers.parse_sacct_table(text)
    assert (rec.job_id, rec.extra) == ("7", {name: "v"})


def test_environment_switches_strict_mode_for_a_process(monkeypatch):
    with strict_fields(None):         # back to the environment's choice
        monkeypatch.setenv(fields.STRICT_ENV, "1")
        assert fields.is_strict()
        monkeypatch.setenv(fields.STRICT_ENV, "")
        assert not fields.is_strict()


class _NodesTransport:
    """A transport whose node listing carries a field no Slurm release printed."""

    name = "fake"

    def __init__(self, field_name: str):
        self.line = f"{NODE_LINE} {field_name}=1"

    def nodes(self):
        return parsers.parse_scontrol_nodes(self.line)

    def topology(self):
        return {}

    def jobs(self, **kw):
        return []

    def accounting(self, **kw):
        return iter(())


def test_strict_failure_is_not_turned_into_unavailable_by_the_guard():
    backend = GuardedBackend(SlurmBackend("c", _NodesTransport(new_name())))
    with pytest.raises(UnknownField):
        backend.inventory()
    with strict_fields(False):
        assert backend.inventory().pools
