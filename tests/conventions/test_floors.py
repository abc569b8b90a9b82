"""The floors (docs/design.md, "The map"): the import-linter ``layers`` contract exists, lists
the floors from the composition root down to tenancy, and excuses at most a short list of
imports, each with its reason; tasks and services name what they import at the top, so a
reader (and import-linter) can follow a task into its service.  Each rule has a self-test."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "broker", "accounting", "portal", "demo", "gpubroker_cli")
# the fault harness arms failpoints inside the code under test: its imports are late on purpose
HARNESS = "broker/faults/"
MAX_IGNORED = 3
MAX_LOCAL_IMPORTS = 9  # "under 10"
FLOORS_TOP_DOWN = ("config", "demo", "broker.web", "broker.tasks", "broker.services", "broker.selectors",
                   "broker.models", "broker.placement", "broker.spec", "portal.restapi", "portal.tenancy")


def _layers_contract(text: str) -> dict:
    contracts = tomllib.loads(text)["tool"]["importlinter"]["contracts"]
    layers = [c for c in contracts if c["type"] == "layers"]
    assert len(layers) == 1, "expected one layers contract"
    return layers[0]


def _floor_of(contract: dict, module: str) -> int:
    for i, layer in enumerate(contract["layers"]):
        if module in [m.strip() for m in layer.replace("|", ":").split(":")]:
            return i
    raise AssertionError(f"{module} is on no floor")


def _ignores_without_reason(text: str) -> list[str]:
    """Each ignored import of the layers contract needs a comment line right above it (or above
    the group of ignores it belongs to)."""
    block = text[text.index('type = "layers"'):]
    block = block[block.index("ignore_imports = ["):block.index("]", block.index("ignore_imports = ["))]
    missing, reason = [], False
    for line in block.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            reason = True
        elif stripped.startswith('"'):
            if not reason:
                missing.append(stripped)
        else:
            reason = False
    return missing


def test_the_floors_are_one_layers_contract_from_the_composition_root_down_to_tenancy():
    contract = _layers_contract((ROOT / "pyproject.toml").read_text())
    floors = [_floor_of(contract, m) for m in FLOORS_TOP_DOWN]
    assert floors == sorted(floors) and len(set(floors)) >= 8, floors


def test_the_layers_contract_excuses_only_a_short_list_each_with_its_reason():
    text = (ROOT / "pyproject.toml").read_text()
    ignored = _layers_contract(text).get("ignore_imports", [])
    assert len(ignored) <= MAX_IGNORED, ignored
    assert _ignores_without_reason(text) == []


def test_the_reason_check_sees_an_ignore_without_a_comment():
    text = '''type = "layers"
ignore_imports = [
    # why
    "a -> b",

    "c -> d",
]'''
    assert _ignores_without_reason(text) == ['"c -> d",']


def local_imports(tree: ast.AST) -> list[int]:
    """Lines of imports inside a function, except in an app's ``ready()`` (Django's place
    for start-up imports) and of optional dependencies guarded by ImportError."""
    lines = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name != "ready":
            lines += [n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return sorted(set(lines))


def _product_local_imports() -> list[str]:
    found = []
    for pkg in PRODUCT:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "migrations" in path.parts or rel.startswith(HARNESS):
                continue
            found += [f"{rel}:{line}" for line in local_imports(ast.parse(path.read_text(), rel))]
    return found


def test_function_local_imports_outside_the_fault_harness_are_under_ten():
    found = _product_local_imports()
    assert len(found) <= MAX_LOCAL_IMPORTS, "import at the top of the module:\n" + "\n".join(found)


def test_the_local_import_check_sees_an_import_in_a_function_but_not_in_ready():
    tree = ast.parse("import os\ndef f():\n    import json\nclass C:\n    def ready(self):\n        import re\n")
    assert local_imports(tree) == [3]
