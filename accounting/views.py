"""Accounting pages: thin views over accounting.selectors and accounting.services."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from accounting.services.budgets import budget_standings
from accounting import selectors
from accounting.chart_data import chargeback_chart_data
from accounting.exports import chargeback_csv, chargeback_xlsx
from accounting.forms import BillUploadForm, ChargebackFilterForm, MonthForm, PeriodForm, RateForm, TcoRateForm
from accounting.periods import this_month
from accounting.services.bills import bill_import
from accounting.services.rates import TcoInputs, rate_set, rate_set_from_tco
from accounting.services.reconciliation import reconciliation_run, reconciliation_run_all
from portal.tenancy.access import is_operator, require_operator, signed_in
from portal.tenancy.errors import DomainError
from portal.pages.nav import accounting_links

_EXPORTS = {
    "csv": (chargeback_csv, "text/csv; charset=utf-8", "csv"),
    "xlsx": (chargeback_xlsx, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
}


@login_required
@require_GET
def accounting_index(request: HttpRequest) -> HttpResponse:
    """The accounting pages this user's roles open: GPU-hours for every member, the rest for finance."""
    return render(request, "accounting/index.html", {"links": accounting_links(user=request.user)})


@login_required
@require_GET
def usage_mine(request: HttpRequest) -> HttpResponse:
    form = MonthForm(request.GET or None)
    month = form.month() if request.GET else this_month()
    lines = selectors.usage_mine(user=request.user, month=month)
    budgets = budget_standings(user=request.user)
    return render(
        request, "accounting/usage_mine.html", {"form": form, "month": month, "lines": lines, "budgets": budgets}
    )


def _chargeback_filters(request: HttpRequest) -> tuple[ChargebackFilterForm, dict]:
    tenants = selectors.finance_tenants(user=request.user)  # 403 for anyone without finance
    form = ChargebackFilterForm(request.GET or None, tenants=tenants)
    return form, form.filters()


@login_required
@require_GET
def chargeback(request: HttpRequest) -> HttpResponse:
    form, filters = _chargeback_filters(request)
    report = selectors.chargeback_report(user=request.user, **filters)
    query = request.GET.copy()
    query.pop("format", None)
    return render(
        request,
        "accounting/chargeback.html",
        {
            "form": form,
            "report": report,
            "query": query.urlencode(),
            "reconciliation": selectors.reconciliation_status(user=request.user, months=report.months),
            "tco_warnings": selectors.cloud_tco_warnings(
                user=request.user, months=report.months, tenant_slug=filters["tenant_slug"]
            ),
            "budgets": budget_standings(user=request.user, tenant_slug=filters["tenant_slug"]),
            "chart_data": chargeback_chart_data(user=request.user, report=report, tenant_slug=filters["tenant_slug"]),
        },
    )


@login_required
@require_GET
def chargeback_export(request: HttpRequest) -> HttpResponse:
    fmt = request.GET.get("format", "csv")
    if fmt not in _EXPORTS:
        return HttpResponseBadRequest("format must be csv or xlsx")
    _, filters = _chargeback_filters(request)
    report = selectors.chargeback_report(user=request.user, **filters)
    render_fn, content_type, ext = _EXPORTS[fmt]
    response = HttpResponse(render_fn(report), content_type=content_type)
    name = f"chargeback-{filters['first']:%Y-%m}-{filters['months']}m.{ext}"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
def bill_list(request: HttpRequest) -> HttpResponse:
    bills = selectors.bill_list(user=request.user)  # 403 for anyone without finance
    form = BillUploadForm(
        request.POST or None,
        request.FILES or None,
        tenants=selectors.finance_tenants(user=request.user),
        clusters=selectors.upload_clusters(),
        tenant_required=not is_operator(request.user),
    )
    errors = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            result = bill_import(
                provider=form.cleaned_data["provider"],
                file_name=upload.name,
                content=upload,
                tenant=form.cleaned_data["tenant"],
                cluster=form.cleaned_data["cluster"],
                actor=signed_in(request.user),
            )
        except DomainError as exc:
            errors = list(exc.details) or [exc]  # each problem with its line and column
        else:
            return _announce(request, result)
    return render(
        request,
        "accounting/bill_list.html",
        {"form": form, "bills": bills, "errors": errors},
        status=400 if errors else 200,
    )


def _announce(request: HttpRequest, result) -> HttpResponse:
    bill = result.bill
    if not result.duplicate:
        messages.success(request, f"Imported {bill.line_count} lines; {result.unmatched} match no project.")
    elif not selectors.bill_list(user=request.user).filter(id=bill.id).exists():
        # someone else's bill: say only that it is known, not whose or what it was called
        messages.info(request, "This file was already imported: nothing was counted again.")
        return redirect("bill-list")
    else:
        messages.info(request, f"This file was already imported as {bill.file_name}: nothing was counted again.")
    return redirect("bill-detail", bill_id=bill.id)


@login_required
@require_GET
def bill_detail(request: HttpRequest, bill_id: int) -> HttpResponse:
    bill = selectors.bill_get(user=request.user, bill_id=bill_id)
    page = Paginator(selectors.bill_lines(bill=bill), 200).get_page(request.GET.get("page"))
    return render(request, "accounting/bill_detail.html", {"bill": bill, "page": page})


@login_required
@require_http_methods(["GET", "POST"])
def reconciliation(request: HttpRequest) -> HttpResponse:
    selectors.finance_scope(user=request.user)  # 403 for anyone without finance
    form = PeriodForm(request.POST if request.method == "POST" else (request.GET or None))
    month = form.month()
    if request.method == "POST" and form.is_valid():
        cluster = form.cleaned_data["cluster"]
        if cluster is not None:
            reconciliation_run(cluster_id=cluster.id, period=month, actor=signed_in(request.user))
        else:
            reconciliation_run_all(period=month, actor=signed_in(request.user))
        messages.success(request, f"Reconciled {month:%Y-%m}.")
        return redirect(f"{reverse('reconciliation')}?period={month:%Y-%m}")
    cluster_name = form.cleaned_data["cluster"].name if form.is_valid() and form.cleaned_data["cluster"] else ""
    runs = selectors.reconciliation_view(user=request.user, period=month, cluster_name=cluster_name)
    return render(request, "accounting/reconciliation.html", {"form": form, "month": month, "runs": runs})


@login_required
@require_http_methods(["GET", "POST"])
def rate_list(request: HttpRequest) -> HttpResponse:
    rates = selectors.rate_list(user=request.user)  # 403 for anyone without finance
    can_set = selectors.can_set_rates(user=request.user)
    kind = request.POST.get("kind", "")
    direct = RateForm(request.POST if kind == "direct" else None, prefix="direct")
    tco = TcoRateForm(request.POST if kind == "tco" else None, prefix="tco")
    if request.method == "POST":
        require_operator(request.user)  # rates are the fleet's prices
        if _save_rate(request, direct if kind == "direct" else tco, kind):
            return redirect("rate-list")
    return render(request, "accounting/rates.html", {"rates": rates, "can_set": can_set, "direct": direct, "tco": tco})


def _save_rate(request: HttpRequest, form, kind: str) -> bool:
    if kind not in ("direct", "tco") or not form.is_valid():
        return False
    data = dict(form.cleaned_data)
    common = {
        "gpu_class": data.pop("gpu_class"),
        "cluster": data.pop("cluster"),
        "valid_from": data.pop("valid_from"),
        "actor": request.user,
    }
    try:
        if kind == "direct":
            rate = rate_set(price_per_gpu_hour=data["price_per_gpu_hour"], **common)
        else:
            rate = rate_set_from_tco(tco=TcoInputs(**data), **common)
    except ValueError as exc:
        form.add_error(None, str(exc))
        return False
    messages.success(request, f"Rate saved: {rate}")
    return True
