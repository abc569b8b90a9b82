"""scripts/assert_counts.py: asserts per test id, before and after, with renames."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import assert_counts as ac  # noqa: E402

BEFORE = '''
import pytest

def _check(x):
    assert x

def test_two():
    assert 1
    with pytest.raises(ValueError):
        int("x")

def test_helper():
    _check(1)

class TestGroup:
    def test_in_class(self):
        assert True
'''


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(BEFORE)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return tmp_path


def test_counts_asserts_raises_and_one_level_of_helpers_per_test_id():
    counts = ac.counts_in("tests/test_a.py", BEFORE)
    assert counts == {"tests/test_a.py::test_two": 2, "tests/test_a.py::test_helper": 1,
                      "tests/test_a.py::TestGroup::test_in_class": 1}


def test_an_unchanged_tree_passes(repo, capsys):
    assert ac.main(["HEAD", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "tests: 3 before, 3 now" in out and "asserts and pytest.raises: 4 before, 4 now" in out
    assert "none went down" in out


def test_a_test_with_fewer_asserts_fails_and_is_named(repo, capsys):
    (repo / "tests" / "test_a.py").write_text(BEFORE.replace("    assert 1\n", ""))
    assert ac.main(["HEAD", "--repo", str(repo)]) == 1
    assert "FEWER tests/test_a.py::test_two: 2 -> 1" in capsys.readouterr().out


def test_a_moved_file_fails_without_a_rename_and_passes_with_one(repo, tmp_path, capsys):
    (repo / "tests" / "sub").mkdir()
    (repo / "tests" / "test_a.py").rename(repo / "tests" / "sub" / "test_b.py")
    assert ac.main(["HEAD", "--repo", str(repo)]) == 1
    assert "GONE tests/test_a.py::test_two" in capsys.readouterr().out
    renames = tmp_path / "renames.txt"
    renames.write_text("# the file moved\ntests/test_a.py -> tests/sub/test_b.py\n")
    assert ac.main(["HEAD", "--repo", str(repo), "--renames", str(renames)]) == 0


def test_a_renamed_test_id_is_followed(repo, tmp_path):
    (repo / "tests" / "test_a.py").write_text(BEFORE.replace("def test_two", "def test_two_checks"))
    renames = tmp_path / "renames.txt"
    renames.write_text("tests/test_a.py::test_two -> tests/test_a.py::test_two_checks\n")
    assert ac.main(["HEAD", "--repo", str(repo), "--renames", str(renames)]) == 0


def test_a_bad_renames_line_is_refused_with_its_number(repo, tmp_path, capsys):
    renames = tmp_path / "renames.txt"
    renames.write_text("tests/test_a.py::x -> tests/b.py\n")
    assert ac.main(["HEAD", "--repo", str(repo), "--renames", str(renames)]) == 2
    assert "renames line 1" in capsys.readouterr().err
