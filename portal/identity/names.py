"""What a cluster identity may be: the forms a POSIX and a Kubernetes user name take, and
the names no tenant admin may hand out (running jobs as root or as Slurm itself, or
impersonating a Kubernetes system identity, would be a way around every limit)."""

from __future__ import annotations

import re

from django.conf import settings

# POSIX portable user names as useradd takes them by default: lower case, no leading digit
# or dash, 32 characters at most.  A name only of digits would read as a uid to sbatch.
POSIX_NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
K8S_USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:+=-]{0,252}$")
DEFAULT_RESERVED = ("root", "slurm", "slurmrestd", "munge", "daemon", "bin", "sys", "nobody", "mysql")


def reserved_posix_names() -> frozenset[str]:
    extra = getattr(settings, "GPUBROKER_RESERVED_POSIX_USERS", ())
    return frozenset(DEFAULT_RESERVED) | frozenset(extra)


def posix_name_problem(value: str, *, what: str = "user") -> str:
    """Why ``value`` cannot be a POSIX user (or group) name here; "" when it can."""
    if not POSIX_NAME_RE.match(value):
        return (
            f"not a POSIX {what} name: lower-case letters, digits, '_' and '-', "
            "starting with a letter or '_', at most 32 characters."
        )
    if value in reserved_posix_names():
        return f"{value!r} is a system account; jobs never run as it."
    return ""


def k8s_user_problem(value: str) -> str:
    if not K8S_USER_RE.match(value):
        return (
            "not a Kubernetes user name: letters, digits and . _ @ : + = -, "
            "starting with a letter or digit, at most 253 characters."
        )
    if value.startswith("system:"):
        return "system: users belong to Kubernetes itself; they are never impersonated."
    return ""
