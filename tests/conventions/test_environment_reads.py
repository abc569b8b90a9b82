"""One configuration source: the settings read the environment, once, and pass it down.
No other product module reads it, except those listed here with the reason."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "broker", "accounting", "portal", "demo", "gpubroker_cli")
ALLOWED = {
    "config/settings.py": "the settings: where the environment is read",
    "config/env.py": "the settings' readers, which name the variable on a bad value",
    "config/celery.py": "names the settings module before there are settings",
    "config/wsgi.py": "names the settings module before there are settings",
    "gpubroker_cli/config.py": "the command-line client's own settings (it runs without Django)",
    "broker/backends/registry.py": "credentials_ref env:NAME: a secret the cluster row names, read, never stored",
    "broker/backends/slurm/commands.py": "a local Slurm command inherits the process environment (PATH, SLURM_CONF)",
    "broker/backends/slurm/rest.py": "the REST client's library defaults: Slurm's own SLURM_JWT and SLURM_REST_USER",
    "broker/backends/slurm/fields.py": "strict parsing for a whole test run, also of parsers used without Django",
    "broker/policyrelease/services/impact.py": "the replay subprocess inherits the process environment",
    "broker/faults/worker.py": "the fault harness's worker (test tooling), told its run by the harness that starts it",
}


def _reads_environment(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            if any(alias.name in ("environ", "getenv", "environb") for alias in node.names):
                lines.append(node.lineno)
    return lines


def test_no_product_module_but_the_settings_reads_the_environment():
    readers = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            name = path.relative_to(ROOT).as_posix()
            if "migrations" in path.parts or name in ALLOWED:
                continue
            lines = _reads_environment(ast.parse(path.read_text(), name))
            if lines:
                readers[name] = lines
    assert not readers, (
        f"these read the environment; add a setting in config/settings.py and pass it down: {readers}")


def test_the_guard_sees_a_read_in_each_form_and_not_a_setting():
    for source in ("import os\nos.environ.get('X')", "import os\nos.getenv('X')", "from os import environ",
                   "import os\nenv = {**os.environ}"):
        assert _reads_environment(ast.parse(source)), source
    assert _reads_environment(ast.parse("from django.conf import settings\nsettings.X")) == []
