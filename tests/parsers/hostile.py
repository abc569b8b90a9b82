"""What the hostile-input tests share: the examples' settings, hostile values and text, and
*mutations* of real samples that remember where they broke the sample, so a test can require
the parser's error to name that very field (not merely some field of the input)."""
from __future__ import annotations

import copy
import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SLURM_FIXTURES = ROOT / "tests" / "broker" / "backends" / "slurm" / "fixtures"
BILL_FIXTURES = ROOT / "tests" / "accounting" / "fixtures"
# CI: the same examples every run (derandomised); a deeper, random search:
#   GPUBROKER_FUZZ_RANDOM=1 GPUBROKER_FUZZ_EXAMPLES=2000 pytest tests/parsers
_RANDOM = bool(os.environ.get("GPUBROKER_FUZZ_RANDOM"))
_N = int(os.environ.get("GPUBROKER_FUZZ_EXAMPLES", "120"))
FAST = settings(max_examples=_N, deadline=None, derandomize=not _RANDOM, database=None,
                suppress_health_check=[HealthCheck.too_slow])
DB = settings(max_examples=max(10, _N // 3), deadline=None, derandomize=not _RANDOM, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


scalars = (st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=True)
           | st.text(max_size=30) | st.sampled_from(["", "N/A", "(null)", "-1", "1e309", "0x1f", "\x00", "∞",
                                                    "2024-13-45T99:99:99", "gpu:a100:x", "gres/gpu=-3"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
hostile_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=400) | st.sampled_from([
    "\x1f" * 40, "|" * 30, "a|b\n" * 5, "NodeName= Gres=gpu:::: State=???", "\ufeff\x00\r\n\r\n"])


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@st.composite
def broken(draw, sample):
    """(``sample`` with one to three values replaced by hostile JSON or their keys dropped,
    the paths it broke)."""
    obj = copy.deepcopy(sample)
    where: list[tuple] = []
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = draw(json_values)
        where.append(path)
    return obj, where


def mutated(sample):
    """``sample`` broken (``broken``), without the record of where."""
    return broken(sample).map(lambda pair: pair[0])


@st.composite
def mangled_lines(draw, text: str):
    """Real text with lines cut short, duplicated, or given a hostile field."""
    lines = text.splitlines()
    out = []
    for line in lines:
        choice = draw(st.integers(0, 5))
        if choice == 0 and line:
            out.append(line[: draw(st.integers(0, len(line)))])
        elif choice == 1:
            out.append(line + draw(st.sampled_from(["|", "\x1f", "|x|y", "=", " Gres=gpu:a100:-1"])))
        elif choice == 2:
            out.append(draw(hostile_text))
        else:
            out.append(line)
    return "\n".join(out)


@st.composite
def with_hostile_lines(draw, text: str, keep_first: bool = False):
    """Real text with one to three hostile lines put between its lines (after the header
    when ``keep_first``); every real line is still there, untouched."""
    lines = text.splitlines()
    out = list(lines)
    for _ in range(draw(st.integers(1, 3))):
        out.insert(draw(st.integers(1 if keep_first else 0, len(out))), draw(hostile_text))
    return "\n".join(out)


def failure(fn, *args):
    """What ``fn(*args)`` raised of the errors a parser may give (``BadField`` is a
    ValueError; the backend guard's are BackendError), or None when it returned.  Anything
    else (AttributeError, KeyError, IndexError from deep inside) propagates: the test fails."""
    from broker.backends.base import BackendError

    try:
        fn(*args)
    except (BackendError, ValueError) as exc:
        return exc
    return None


def field_name(path: tuple) -> str:
    """A path into a decoded answer as the parsers' messages write it (``status.conditions[0]``)."""
    from broker.backends.json_fields import where

    return where(path)


def names_a_broken_field(exc: BaseException, broken_fields: list[str]) -> bool:
    """The error is ``field F: expected ...`` and F is one of ``broken_fields`` (as
    ``field_name`` writes them), or a field inside one (the hostile value put there), never
    one the mutation left alone."""
    field = getattr(exc, "field", None)
    if field is None or not str(exc).startswith(f"field {field}: expected "):
        return False
    return any(field == name or field.startswith((f"{name}.", f"{name}[")) for name in broken_fields)
