"""URLconf for the accounting tests: the portal's own URLs, the accounting app's, and
stand-ins for navigation links (base.html) whose apps are built elsewhere in parallel.

Once config/urls.py includes accounting.urls this still works: the first match wins.
"""
from django.http import HttpResponse
from django.urls import NoReverseMatch, include, path, reverse

import config.urls

_NAV = ("fleet", "workload-list", "workload-new", "quota-list", "cluster-list", "escalation-list",
        "reservation-list")


def _stub(request, *args, **kwargs):
    return HttpResponse("stub")


def _missing(name: str) -> bool:
    try:
        reverse(name, urlconf=config.urls)
    except NoReverseMatch:
        return True
    return False


urlpatterns = [
    *config.urls.urlpatterns,
    path("accounting/", include("accounting.urls")),
    *[path(f"__stub__/{name}/", _stub, name=name) for name in _NAV if _missing(name)],
]
