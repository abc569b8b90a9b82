"""Forms for the broker pages: they collect input; validation of the spec itself
lives in broker.spec so the form, the API and the backends agree."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django import forms

from broker.models import GpuClass
from broker.services.fleet.policy import current_policy
from broker.spec import PRIORITIES

if TYPE_CHECKING:
    from portal.tenancy.models import Project


class WorkloadForm(forms.Form):
    project: forms.ModelChoiceField[Project] = forms.ModelChoiceField(queryset=None, empty_label=None)
    name = forms.CharField(max_length=52, help_text="lower-case letters, digits and '-'")
    command = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), initial="python train.py")
    image = forms.CharField(required=False, help_text="Container image (Kubernetes clusters)")
    gpu_class = forms.ModelChoiceField(
        queryset=GpuClass.objects.all(), to_field_name="slug", required=False, label="GPU class"
    )
    gpu_models = forms.CharField(
        required=False, label="GPU models", help_text="Or accepted GPU models, comma-separated"
    )
    min_gpu_memory_gb = forms.IntegerField(required=False, min_value=0, initial=0, label="Min. GPU memory (GB)")
    mig_profile = forms.CharField(required=False, label="MIG profile", help_text="e.g. 1g.10gb; empty for whole GPUs")
    gpus_per_worker = forms.IntegerField(min_value=1, initial=1, label="GPUs per worker")
    gpu_share = forms.BooleanField(
        required=False,
        label="Shares of a GPU",
        help_text="Each GPU per worker is then a share of a shared GPU (time-slicing, MPS, Slurm shard), charged so",
    )
    workers = forms.IntegerField(min_value=1, initial=1, help_text="The gang: all start together")
    cpus_per_worker = forms.IntegerField(min_value=1, initial=4, label="CPUs per worker")
    memory_gb_per_worker = forms.IntegerField(min_value=1, initial=16, label="Memory per worker (GB)")
    time_limit_minutes = forms.IntegerField(min_value=1, initial=60)
    data_location = forms.CharField(required=False)
    data_size_gb = forms.FloatField(required=False, min_value=0, initial=0, label="Data size (GB)")
    residency = forms.CharField(required=False, help_text="Allowed regions, comma-separated")
    same_interconnect = forms.BooleanField(required=False)
    topology_level = forms.CharField(
        required=False,
        max_length=63,
        label="Workers share a",
        help_text="Topology level for a gang: host, rack, block, or a cluster's own (tier 2, a node label)",
    )
    topology_mode = forms.ChoiceField(
        required=False,
        choices=[("required", "required: only where one holds the whole gang"), ("preferred", "preferred")],
        initial="required",
        label="Topology level is",
    )
    priority = forms.ChoiceField(choices=[(p, p) for p in PRIORITIES], initial="normal")
    priority_class = forms.ChoiceField(
        required=False,
        choices=[("", "none: by priority")],
        help_text="A fleet priority class of the policy: it sets the priority and what the job runs at on each cluster",
    )
    checkpointable = forms.BooleanField(required=False, help_text="May be resubmitted from its checkpoint")
    gpu_check = forms.BooleanField(
        required=False,
        label="Check the GPUs first",
        help_text="Before the command, each worker checks it sees its GPUs; a failure places the job again elsewhere",
    )
    gpu_check_command = forms.CharField(
        required=False,
        max_length=4000,
        label="GPU check command",
        help_text="Your own check instead (a shell command; non-zero exit fails it)",
    )
    off_peak = forms.BooleanField(
        required=False, label="Start off-peak", help_text="Start only in the off-peak hours of the site it runs at"
    )
    resubmit_of = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, projects=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = projects
        classes = current_policy().policy.priority_classes
        field = self.fields["priority_class"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "none: by priority")] + [(n, f"{n} ({c.level})") for n, c in classes.items()]

    def spec_data(self) -> dict:
        data = {
            k: v for k, v in self.cleaned_data.items() if k not in ("project", "resubmit_of") and v not in (None, "")
        }
        if self.cleaned_data.get("gpu_class"):
            data["gpu_class"] = self.cleaned_data["gpu_class"].slug
        if not data.get("topology_level"):
            data.pop("topology_mode", None)  # the select always sends one
        return data


QUOTA_MAX_GPUS = 1_000_000  # far above any fleet; a bigger number is a typo, not a quota


class QuotaForm(forms.Form):
    limit_gpus = forms.IntegerField(min_value=0, max_value=QUOTA_MAX_GPUS)
    borrow_limit_gpus = forms.IntegerField(min_value=0, max_value=QUOTA_MAX_GPUS, required=False)


class EscalationResolveForm(forms.Form):
    outcome = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    old_run_dead = forms.BooleanField(required=False, label="The old run is known to be dead")
