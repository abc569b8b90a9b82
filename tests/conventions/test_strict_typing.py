"""Where decisions, state moves and money are written, mypy is strict: every function typed
and no explicit ``Any`` (the ``[[tool.mypy.overrides]]`` of pyproject.toml), and nothing
in those modules switches the checker off again (``# type: ignore``, ``cast(Any, ...)``)."""

from __future__ import annotations

import ast
import io
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the strict packages, as the files that make them up
STRICT = {
    "broker.placement.*": "broker/placement",
    "broker.lifecycle": "broker/lifecycle.py",
    "accounting.services.*": "accounting/services",
    "broker.services.*": "broker/services",
}
REQUIRED = ("disallow_untyped_defs", "disallow_any_explicit")


def module_names() -> dict[str, Path]:
    """Every module of the strict packages by its dotted name."""
    out: dict[str, Path] = {}
    for where in STRICT.values():
        path = ROOT / where
        for file in [path] if path.suffix == ".py" else sorted(path.rglob("*.py")):
            parts = file.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return out


def _matches(pattern: str, module: str) -> int:
    """How specifically ``pattern`` names ``module`` (0: not at all), as mypy ranks them."""
    if pattern == module:
        return 1000
    if pattern.endswith(".*") and (module == pattern[:-2] or module.startswith(pattern[:-1])):
        return pattern.count(".")
    return 0


def options_for(module: str, overrides: list[dict[str, object]]) -> dict[str, object]:
    """The override options mypy applies to ``module``: the more specific pattern wins."""
    ranked: list[tuple[int, dict[str, object]]] = []
    for override in overrides:
        patterns = override.get("module", [])
        patterns = [patterns] if isinstance(patterns, str) else patterns
        rank = max((_matches(p, module) for p in patterns if isinstance(p, str)), default=0)
        if rank:
            ranked.append((rank, override))
    options: dict[str, object] = {}
    for _, override in sorted(ranked, key=lambda r: r[0]):
        options.update(override)
    return options


def not_strict(modules: list[str], overrides: list[dict[str, object]]) -> list[str]:
    return [m for m in modules if not all(options_for(m, overrides).get(flag) is True for flag in REQUIRED)]


def _is_any(node: ast.expr) -> bool:
    return (
        (isinstance(node, ast.Name) and node.id == "Any")
        or (isinstance(node, ast.Attribute) and node.attr == "Any")
        or (isinstance(node, ast.Constant) and node.value == "Any")
    )


def escapes(source: str) -> list[tuple[int, str]]:
    """Lines that switch the checker off: ``# type: ignore`` comments, ``cast(Any, ...)``."""
    found = [
        (tok.start[0], "type: ignore")
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT and "type:" in tok.string and "ignore" in tok.string.split("type:", 1)[1]
    ]
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "cast")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "cast")
            )
            and node.args
            and _is_any(node.args[0])
        ):
            found.append((node.lineno, "cast(Any, ...)"))
    return sorted(found)


def _overrides() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["mypy"].get("overrides", []))


def test_the_strict_packages_are_checked_with_every_function_typed_and_no_explicit_any():
    modules = sorted(module_names())
    assert len(modules) > 40  # the packages were found
    assert not_strict(modules, _overrides()) == []


def test_nothing_in_the_strict_packages_switches_the_checker_off():
    found = {
        path.relative_to(ROOT).as_posix(): hits
        for path in module_names().values()
        if (hits := escapes(path.read_text()))
    }
    assert found == {}, f"no type: ignore and no cast(Any, ...) here; type the value instead: {found}"


def test_the_guard_sees_a_package_left_out_or_relaxed_by_a_more_specific_override():
    strict = {"disallow_untyped_defs": True, "disallow_any_explicit": True}
    overrides: list[dict[str, object]] = [
        {"module": ["broker.services.*", "broker.lifecycle"], **strict},
        {"module": "broker.services.records.bulk_moves", "disallow_any_explicit": False},
        {"module": "accounting.services.*", "disallow_untyped_defs": True},
    ]
    modules = [
        "broker.services.placing.cycle",
        "broker.services.records.bulk_moves",
        "broker.lifecycle",
        "accounting.services.usage",
        "broker.placement.engine",
    ]
    assert not_strict(modules, overrides) == [
        "broker.services.records.bulk_moves",
        "accounting.services.usage",
        "broker.placement.engine",
    ]


def test_the_guard_sees_each_way_of_switching_the_checker_off():
    source = """
from typing import Any, cast
import typing
a = cast(Any, 1)
b = typing.cast("Any", 2)
c = f(3)  # type: ignore[arg-type]
d = cast(int, 4)
e = "# type: ignore in a string is no comment"
"""
    assert escapes(source) == [(4, "cast(Any, ...)"), (5, "cast(Any, ...)"), (6, "type: ignore")]
