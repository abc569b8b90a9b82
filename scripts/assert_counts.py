"""Behaviour unchanged, test by test: the asserts of every test now against a base commit.

    python scripts/assert_counts.py BASE [--renames FILE] [--quiet]

For every test function of ``tests/**/test_*.py`` (``path::name`` or ``path::Class::name``;
a parametrized test counts once) it counts the ``assert`` statements and the
``pytest.raises`` uses in its body, plus those of the module's own helper functions it calls
(one level down: a check moved into a helper still counts), in the commit ``BASE`` and in the
working tree.  ``--renames FILE`` maps what moved: one ``OLD -> NEW`` a line, each side a test
id or a test file path (a file line moves every test of that file); ``#`` starts a comment.

It prints the totals and every test whose count went down or that is gone without a rename,
and exits 1 when there is any (0 otherwise).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TESTS = "tests"


@dataclass(frozen=True)
class Renames:
    ids: dict[str, str]
    files: dict[str, str]

    def new_id(self, old: str) -> str:
        if old in self.ids:
            return self.ids[old]
        path, _, rest = old.partition("::")
        return f"{self.files[path]}::{rest}" if path in self.files else old


def parse_renames(text: str) -> Renames:
    ids: dict[str, str] = {}
    files: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        old, sep, new = (part.strip() for part in line.partition("->"))
        if not sep or not old or not new:
            raise ValueError(f"renames line {number}: expected 'OLD -> NEW', got {raw!r}")
        if ("::" in old) != ("::" in new):
            raise ValueError(f"renames line {number}: a test id maps to a test id, a file to a file")
        (ids if "::" in old else files)[old] = new
    return Renames(ids, files)


def _checks(node: ast.AST) -> int:
    count = 0
    for child in ast.walk(node):
        if isinstance(child, ast.Assert):
            count += 1
        elif isinstance(child, ast.Call):
            func = child.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            count += name == "raises"
    return count


def _called(node: ast.AST) -> set[str]:
    return {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}


def counts_in(path: str, source: str) -> dict[str, int]:
    """Test id -> asserts and ``pytest.raises`` of each test function of one file."""
    try:
        tree = ast.parse(source, path)
    except SyntaxError as exc:
        raise ValueError(f"{path}: cannot parse ({exc.msg}, line {exc.lineno})") from None
    helpers = {
        n.name: _checks(n)
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not n.name.startswith("test")
    }
    tests: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            tests.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            tests += [
                (f"{node.name}::{m.name}", m)
                for m in node.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name.startswith("test")
            ]
    return {
        f"{path}::{name}": _checks(fn) + sum(helpers.get(called, 0) for called in _called(fn))
        for name, fn in tests
    }


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith(f"{TESTS}/") and name.startswith("test_") and name.endswith(".py")


def counts_at(commit: str, repo: Path) -> dict[str, int]:
    listed = _git(repo, "ls-tree", "-r", "--name-only", commit, TESTS).split()
    found: dict[str, int] = {}
    for path in filter(_is_test_file, listed):
        found.update(counts_in(path, _git(repo, "show", f"{commit}:{path}")))
    return found


def counts_now(repo: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for file in sorted((repo / TESTS).rglob("test_*.py")):
        path = file.relative_to(repo).as_posix()
        found.update(counts_in(path, file.read_text(encoding="utf-8")))
    return found


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise ValueError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Comparison:
    before: dict[str, int]
    after: dict[str, int]
    fewer: list[tuple[str, str, int, int]]  # old id, new id, before, after
    gone: list[str]

    @property
    def ok(self) -> bool:
        return not self.fewer and not self.gone


def compare(before: dict[str, int], after: dict[str, int], renames: Renames) -> Comparison:
    fewer, gone = [], []
    for old, count in sorted(before.items()):
        new = renames.new_id(old)
        if new not in after:
            gone.append(old if new == old else f"{old} -> {new}")
        elif after[new] < count:
            fewer.append((old, new, count, after[new]))
    return Comparison(before, after, fewer, gone)


def report(result: Comparison) -> str:
    lines = [
        f"tests: {len(result.before)} before, {len(result.after)} now",
        f"asserts and pytest.raises: {sum(result.before.values())} before, {sum(result.after.values())} now",
    ]
    lines += [f"FEWER {old}{'' if old == new else ' -> ' + new}: {a} -> {b}" for old, new, a, b in result.fewer]
    lines += [f"GONE {test} (no rename says where it went)" for test in result.gone]
    lines.append("none went down" if result.ok else f"{len(result.fewer)} went down, {len(result.gone)} gone")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the commit to compare with")
    parser.add_argument("--renames", type=Path, help="a file of 'OLD -> NEW' lines (test ids or test files)")
    parser.add_argument("--repo", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    try:
        renames = parse_renames(args.renames.read_text(encoding="utf-8")) if args.renames else Renames({}, {})
        result = compare(counts_at(args.base, args.repo), counts_now(args.repo), renames)
    except (OSError, ValueError) as exc:
        print(f"assert_counts: {exc}", file=sys.stderr)
        return 2
    print(report(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
