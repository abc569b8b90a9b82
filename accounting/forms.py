"""Forms of the accounting pages: input checking only; the work is in services."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, cast

from django import forms
from django.db.models import QuerySet

from accounting.models import BillProvider
from accounting.periods import add_months, parse_month, this_month
from broker.models import Cluster, GpuClass, Location

if TYPE_CHECKING:
    from portal.tenancy.models import Tenant


class MonthField(forms.CharField):
    def __init__(self, **kwargs):
        kwargs.setdefault("widget", forms.TextInput(attrs={"type": "month", "placeholder": "YYYY-MM"}))
        super().__init__(**kwargs)

    def to_python(self, value) -> date | None:  # type: ignore[override]  # a month, not the text
        text = super().to_python(value)
        if not text:
            return None
        try:
            return parse_month(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def prepare_value(self, value):
        return f"{value:%Y-%m}" if isinstance(value, date) else value


class ChargebackFilterForm(forms.Form):
    first = MonthField(label="From month", required=False)
    months = forms.IntegerField(label="Months", min_value=1, max_value=36, required=False)
    # a slug, not a choice: a tenant outside the user's scope must reach the selector and be a 404
    tenant = forms.SlugField(required=False, widget=forms.Select)
    project = forms.SlugField(required=False, help_text="Project slug within the tenant")

    def __init__(self, *args, tenants: QuerySet, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].widget.choices = [("", "All my tenants")] + [(t.slug, t.name) for t in tenants]

    def filters(self) -> dict:
        """The cleaned filters, or the defaults (the last six months) when the form is bad."""
        data = self.cleaned_data if self.is_valid() else {}
        months = data.get("months") or 6
        first = data.get("first") or add_months(this_month(), 1 - months)
        tenant = data.get("tenant") or ""
        # a project slug is only unique inside its tenant
        project = (data.get("project") or "") if tenant else ""
        return {"first": first, "months": months, "tenant_slug": tenant, "project_slug": project}


class MonthForm(forms.Form):
    period = MonthField(label="Month", required=False)

    def month(self) -> date:
        return (self.cleaned_data.get("period") if self.is_valid() else None) or this_month()


class PeriodForm(MonthForm):
    cluster = forms.ModelChoiceField(
        Cluster.objects.all(), required=False, to_field_name="name", empty_label="Every cluster"
    )


class BillUploadForm(forms.Form):
    provider = forms.ChoiceField(choices=BillProvider.choices)
    tenant: forms.ModelChoiceField[Tenant] = forms.ModelChoiceField(
        queryset=None, required=False, help_text="Whose cloud account the bill is for"
    )
    cluster: forms.ModelChoiceField[Cluster] = forms.ModelChoiceField(
        queryset=None, required=False, empty_label="(none)", help_text="The cloud cluster it covers, for reconciliation"
    )
    file = forms.FileField(help_text="CSV, UTF-8")

    def __init__(self, *args, tenants: QuerySet, clusters: QuerySet, tenant_required: bool, **kwargs):
        super().__init__(*args, **kwargs)
        tenant_field = cast(forms.ModelChoiceField, self.fields["tenant"])  # fields is typed by name only
        tenant_field.queryset = tenants
        tenant_field.required = tenant_required
        tenant_field.empty_label = "---------" if tenant_required else "Organisation-wide"
        cast(forms.ModelChoiceField, self.fields["cluster"]).queryset = clusters
        if tenant_required and tenants.count() == 1:
            self.fields["tenant"].initial = tenants.first()


class RateForm(forms.Form):
    gpu_class = forms.ModelChoiceField(GpuClass.objects.all())
    cluster = forms.ModelChoiceField(
        Cluster.objects.filter(location=Location.ONPREM), required=False, empty_label="Every on-prem cluster"
    )
    valid_from = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    price_per_gpu_hour = forms.DecimalField(min_value=Decimal("0"), max_digits=12, decimal_places=4)


class TcoRateForm(forms.Form):
    gpu_class = forms.ModelChoiceField(GpuClass.objects.all())
    cluster = forms.ModelChoiceField(
        Cluster.objects.filter(location=Location.ONPREM), required=False, empty_label="Every on-prem cluster"
    )
    valid_from = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    hardware_cost = forms.DecimalField(min_value=Decimal("0"))
    life_years = forms.DecimalField(min_value=Decimal("0.1"))
    power_kw = forms.DecimalField(min_value=Decimal("0"), label="Power (kW, whole system)")
    price_per_kwh = forms.DecimalField(min_value=Decimal("0"))
    support_per_year = forms.DecimalField(min_value=Decimal("0"))
    staff_per_year = forms.DecimalField(min_value=Decimal("0"))
    gpus = forms.IntegerField(min_value=1)
    utilisation = forms.DecimalField(
        min_value=Decimal("0.01"), max_value=Decimal("1"), help_text="Fraction of hours the GPUs are busy, e.g. 0.7"
    )
