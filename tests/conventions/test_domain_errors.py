"""Errors declare their meaning: every error a user is told about is a ``DomainError``
(``portal/tenancy/errors.py``) carrying its own HTTP status, code and field.  So the error
table knows no error class (it imports nothing from ``broker`` or ``accounting``), no view
catches one error class by name (it catches ``DomainError`` and renders from its attributes),
and a service's refused error that forgot the base would reach the user as a 500."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "broker", "accounting", "portal", "demo", "gpubroker_cli")
BASE = "DomainError"
# The error table and the base it reads: below the broker and accounting, never above them.
GROUND = ("portal/tenancy/refusals.py", "portal/tenancy/errors.py")
# Where errors raised to users are defined: the services, and the plain-data checks they
# share with the API (a spec, a log query, a policy file).
SERVICE_MODULES = ("broker/spec.py", "broker/workload_logs.py", "broker/policyrelease/validation.py")
# Exception classes of the services that never reach a user, each with why.
INTERNAL = {
    "QuotaExceeded": "placement's: the workload waits for its quota; no request is refused",
    "NotMapped": "MultiKueue admission's: recorded on the workload it could not take in",
    "TransitionRefused": "a bug in the caller (a move the lifecycle table lacks), never bad input: a 500",
    "IdentityRefused": "the sign-in backend's: it answers 'no user' and logs, Django shows its login error",
}
# Django's exceptions the product's errors may also derive from (so they are still exceptions).
OTHER_EXCEPTIONS = {"PermissionDenied", "ValidationError", "ObjectDoesNotExist"}


def product_modules() -> list[Path]:
    return sorted(p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py") if "migrations" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def is_view_module(rel: str) -> bool:
    """Pages, the API's views and the admin: the modules that answer a request."""
    parts = rel.split("/")
    name = parts[-1]
    return (
        rel.startswith(("broker/web/", "broker/api/", "portal/pages/"))
        and name not in ("services.py", "models.py", "apps.py")
        or name.startswith("views")
        or name == "admin.py"
    )


def is_service_module(rel: str) -> bool:
    return "services" in rel.split("/")[:-1] or rel.endswith("/services.py") or rel in SERVICE_MODULES


def _name(node: ast.expr) -> str:
    """``SpecError`` for ``SpecError`` and for ``spec.SpecError``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def imported_packages(tree: ast.AST) -> set[str]:
    """Top-level packages a module imports, function-local imports included."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def class_bases(trees: list[ast.AST]) -> dict[str, set[str]]:
    """Each class defined in the trees -> the names of its bases."""
    bases: dict[str, set[str]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(_name(b) for b in node.bases)
    return bases


def descendants(bases: dict[str, set[str]], roots: set[str]) -> set[str]:
    """The classes deriving (directly or not) from one of ``roots``."""
    found: set[str] = set()
    while True:
        more = {cls for cls, of in bases.items() if of & (roots | found)} - found
        if not more:
            return found
        found |= more


def exception_roots() -> set[str]:
    builtin = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    return builtin | OTHER_EXCEPTIONS


def specific_catches(tree: ast.AST, domain_errors: set[str]) -> list[tuple[int, str]]:
    """``except`` clauses naming one domain error class (not the base)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            found += [(node.lineno, _name(c)) for c in caught if _name(c) in domain_errors]
    return found


def forgot_the_base(tree: ast.AST, exceptions: set[str], domain_errors: set[str]) -> list[tuple[int, str]]:
    """Public exception classes a module defines that are neither domain errors nor listed as
    internal (``_Private`` ones are the module's own control flow)."""
    return [
        (node.lineno, node.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and node.name in exceptions
        and not node.name.startswith("_")
        and node.name not in domain_errors | {BASE}
        and node.name not in INTERNAL
    ]


def _parsed() -> dict[str, ast.AST]:
    return {_rel(p): ast.parse(p.read_text(), filename=_rel(p)) for p in product_modules()}


def test_the_error_table_imports_nothing_from_broker_or_accounting():
    trees = _parsed()
    offenders = {rel: sorted(imported_packages(trees[rel]) & {"broker", "accounting"}) for rel in GROUND}
    assert offenders == {rel: [] for rel in GROUND}


def test_no_view_catches_a_specific_domain_error():
    trees = _parsed()
    domain_errors = descendants(class_bases(list(trees.values())), {BASE})
    assert {"SpecError", "ReleaseRefused", "BillRejected", "OwnRequest"} <= domain_errors  # the check sees them
    views = [rel for rel in trees if is_view_module(rel)]
    assert {"broker/web/views.py", "accounting/views.py", "broker/api/views.py", "broker/admin.py"} <= set(views)
    offenders = [
        f"{rel}:{line}: except {name}" for rel in views for line, name in specific_catches(trees[rel], domain_errors)
    ]
    assert offenders == [], "views catch DomainError and render from its attributes:\n" + "\n".join(offenders)


def test_every_service_error_raised_to_users_is_a_domain_error():
    trees = _parsed()
    bases = class_bases(list(trees.values()))
    exceptions = descendants(bases, exception_roots())
    domain_errors = descendants(bases, {BASE})
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in trees.items()
        if is_service_module(rel)
        for line, name in forgot_the_base(tree, exceptions, domain_errors)
    ]
    assert offenders == [], "subclass portal.tenancy.errors.DomainError (or list it in INTERNAL, with why):\n" + (
        "\n".join(offenders)
    )
    stale = sorted(name for name in INTERNAL if name not in exceptions or name in domain_errors)
    assert stale == [], "INTERNAL names classes that are gone or are domain errors now"


# ---- self-tests: each check sees what it forbids --------------------------------------------


def test_the_import_check_sees_a_function_local_import():
    code = (
        "import portal.tenancy.errors\n"
        "def rules():\n    from broker.spec import SpecError\n    import accounting.services.bills\n"
    )
    assert imported_packages(ast.parse(code)) == {"portal", "broker", "accounting"}


def test_the_catch_check_sees_a_named_domain_error_and_passes_the_base():
    code = (
        "try:\n    pass\nexcept SpecError:\n    pass\n"
        "try:\n    pass\nexcept (ValueError, release_services.ReleaseRefused) as exc:\n    pass\n"
        "try:\n    pass\nexcept DomainError as exc:\n    pass\n"
        "try:\n    pass\nexcept ValueError:\n    pass\n"
    )
    assert specific_catches(ast.parse(code), {"SpecError", "ReleaseRefused"}) == [
        (3, "SpecError"),
        (7, "ReleaseRefused"),
    ]


def test_the_class_check_sees_an_error_that_forgot_the_base():
    code = (
        "class DomainError(Exception): pass\n"
        "class Refused(DomainError, ValueError): pass\n"
        "class MoreRefused(Refused): pass\n"
        "class Forgot(ValueError): pass\n"
        "class AlsoForgot(Forgot): pass\n"
        "class _Private(Exception): pass\n"
        "class Record: pass\n"
        "class QuotaExceeded(Exception): pass\n"  # listed as internal
    )
    tree = ast.parse(code)
    bases = class_bases([tree])
    exceptions = descendants(bases, exception_roots())
    domain = descendants(bases, {BASE})
    assert domain == {"Refused", "MoreRefused"}
    assert [name for _, name in forgot_the_base(tree, exceptions, domain)] == ["Forgot", "AlsoForgot"]


def test_the_module_kinds_are_told_apart():
    assert is_view_module("broker/web/quota_requests.py") and is_view_module("accounting/views.py")
    assert is_view_module("broker/api/views_quota_requests.py") and is_view_module("portal/identity/views.py")
    assert not is_view_module("broker/api/services.py") and not is_view_module("broker/services/quota/reservations.py")
    assert is_service_module("broker/services/quota/reservations.py") and is_service_module("broker/api/services.py")
    assert is_service_module("portal/identity/services/provisioning.py") and is_service_module("broker/spec.py")
    assert not is_service_module("broker/web/views.py")
