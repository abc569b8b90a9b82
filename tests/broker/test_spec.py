"""The one workload spec: validated with an error per field."""
from __future__ import annotations

import pytest

from broker.spec import SpecError, WorkloadSpec, validate_spec

VALID = {"project": "lattice", "name": "train-1", "command": "python train.py", "gpu_class": "a100-80gb",
         "gpus_per_worker": 2, "workers": 4}


def test_valid_spec_round_trips_through_a_dict():
    spec = validate_spec(VALID)
    assert spec.total_gpus == 8 and spec.partitioning == "whole" and spec.priority == "normal"
    assert validate_spec(spec.to_dict()) == spec


def test_every_bad_field_is_named_at_once():
    with pytest.raises(SpecError) as exc:
        validate_spec({**VALID, "name": "Bad Name", "gpus_per_worker": 0, "workers": "many",
                       "mig_profile": "half", "priority": "urgent", "colour": "blue"})
    assert set(exc.value.errors) == {"name", "gpus_per_worker", "workers", "mig_profile", "priority", "colour"}
    assert "between 1 and 16" in exc.value.errors["gpus_per_worker"][0]


def test_gpu_class_or_models_is_required():
    with pytest.raises(SpecError) as exc:
        validate_spec({k: v for k, v in VALID.items() if k != "gpu_class"})
    assert "gpu_class" in exc.value.errors
    assert validate_spec({**VALID, "gpu_class": "", "gpu_models": "A100, H100"}).gpu_models == ("A100", "H100")


@pytest.mark.parametrize("profile", ["1g.10gb", "3g.40gb", "7g.80gb"])
def test_mig_profiles_are_accepted(profile):
    assert validate_spec({**VALID, "mig_profile": profile}).partitioning == profile


def test_hostile_text_is_refused_not_stored():
    with pytest.raises(SpecError) as exc:
        validate_spec({**VALID, "command": "x" * 5000, "image": "a\x00b"})
    assert {"command", "image"} <= set(exc.value.errors)


def test_booleans_and_lists_accept_form_strings():
    spec = validate_spec({**VALID, "checkpointable": "on", "same_interconnect": "false", "residency": "eu,onprem"})
    assert spec.checkpointable is True and spec.same_interconnect is False and spec.residency == ("eu", "onprem")
    assert isinstance(spec, WorkloadSpec)


def test_a_yes_or_no_field_refuses_words_it_cannot_read_and_names_the_field():
    assert validate_spec({**VALID, "off_peak": "yes"}).off_peak is True
    with pytest.raises(SpecError) as exc:
        validate_spec({**VALID, "off_peak": "tonight", "checkpointable": 2})
    assert exc.value.errors == {"off_peak": ["must be true or false."], "checkpointable": ["must be true or false."]}


def test_a_gang_may_require_or_prefer_a_topology_level_and_a_level_named_alone_is_required():
    required = WorkloadSpec.from_dict(dict(VALID, workers=2, topology_level="rack"))
    assert (required.topology_mode, required.level_required, required.level_preferred) == ("required", "rack", "")
    preferred = WorkloadSpec.from_dict(dict(VALID, workers=2, topology_level="tier 2", topology_mode="preferred"))
    assert (preferred.level_required, preferred.level_preferred) == ("", "tier 2")
    assert WorkloadSpec.from_dict(preferred.to_dict()) == preferred


@pytest.mark.parametrize(
    "extra, field, words",
    [
        (dict(workers=1, topology_level="rack"), "topology_level", "gang of 2 or more"),
        (dict(workers=2, topology_level="rack", topology_mode="always"), "topology_mode", "required, preferred"),
        (dict(workers=2, topology_mode="preferred"), "topology_mode", "name the level too"),
        (dict(workers=2, topology_level="rack;rm -rf"), "topology_level", "a level name"),
        (dict(workers=2, topology_level="rack", same_interconnect=True), "topology_level", "not both"),
    ],
)
def test_a_topology_level_the_spec_cannot_keep_is_refused_naming_the_field(extra, field, words):
    with pytest.raises(SpecError) as err:
        WorkloadSpec.from_dict(dict(VALID, **extra))
    assert list(err.value.errors) == [field]
    assert words in " ".join(err.value.errors[field])


def test_a_gpu_check_command_alone_is_refused_naming_it_and_with_the_check_is_kept():
    with pytest.raises(SpecError) as err:
        WorkloadSpec.from_dict(dict(VALID, gpu_check_command="nvidia-smi"))
    assert list(err.value.errors) == ["gpu_check_command"] and "gpu_check" in err.value.errors["gpu_check_command"][0]
    spec = WorkloadSpec.from_dict(dict(VALID, gpu_check=True, gpu_check_command="nvidia-smi"))
    assert (spec.gpu_check, spec.gpu_check_command) == (True, "nvidia-smi")


def test_the_nodes_to_avoid_are_the_brokers_to_set_and_a_job_that_sets_them_is_told_so():
    with pytest.raises(SpecError) as err:
        WorkloadSpec.from_dict(dict(VALID, exclude_nodes=["n1"]))
    assert err.value.errors == {"exclude_nodes": ["is set by the broker at dispatch, not by a job."]}
    assert WorkloadSpec.from_dict(dict(VALID, exclude_nodes=[])).exclude_nodes == ()
