"""Check a policy text before it is stored: the field at fault and its line in the YAML.

The placement library's loader names the dotted key of the first problem; the line comes
from the YAML node tree (``yaml.compose`` keeps each node's start mark), so an editor can
point at it.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from broker.placement.policy import Policy, PolicyError
from broker.placement.policy_loader import load_policy
from portal.tenancy.errors import DomainError

MAX_POLICY_CHARS = 200_000


@dataclass(frozen=True)
class PolicyProblem:
    field: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "(no line)"
        return f"{where}: {self.field}: {self.message}"


class PolicyInvalid(DomainError, ValueError):
    """The policy's first problem, on the form's ``content`` (its line and field in ``details``)."""

    field = "content"

    def __init__(self, problem: PolicyProblem):
        self.problem = problem
        self.details = (problem,)
        super().__init__(str(problem))


def check_policy(text: str) -> Policy:
    """The parsed policy, or PolicyInvalid naming the field and line of the first problem."""
    if not isinstance(text, str) or not text.strip():
        raise PolicyInvalid(PolicyProblem("(file)", None, "is empty"))
    if len(text) > MAX_POLICY_CHARS:
        raise PolicyInvalid(PolicyProblem("(file)", None, f"is longer than {MAX_POLICY_CHARS} characters"))
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise PolicyInvalid(PolicyProblem("(yaml)", mark.line + 1 if mark else None, problem)) from None
    try:
        return load_policy(text)
    except PolicyError as exc:
        message = str(exc).split(": ", 1)[-1]
        raise PolicyInvalid(PolicyProblem(exc.key, line_of(root, exc.key), message)) from None


def line_of(root: yaml.Node | None, dotted: str) -> int | None:
    """1-based line of the deepest node along ``a.b.c`` that exists (the key itself when
    it is there: that is where the reader should look)."""
    if root is None:
        return None
    node, line = root, root.start_mark.line + 1
    if dotted in ("", "(file)"):
        return line
    for part in dotted.split("."):
        if not isinstance(node, yaml.MappingNode):
            break
        for key_node, value_node in node.value:
            if str(key_node.value) == part:
                node, line = value_node, key_node.start_mark.line + 1
                break
        else:
            break
    return line
