"""Which GPU class of the policy serves each GPU type a trace asks for.

Traces name the GPUs of *their* cluster (Alibaba openb: G1/G2/G3/T4/P100/V100M16/V100M32/
A10); the replay fleet has other hardware.  The table maps each trace type to the policy
class (``broker/policy/default.yaml``) of the fleet GPU that plays its part: same role
and at least the same memory.  It is explicit so a reader can disagree with one line.
"""

from __future__ import annotations

from typing import Iterable, Mapping

# trace GPU type -> policy GPU class; why on each line
GPU_TYPE_CLASS: Mapping[str, str] = {
    "T4": "l4",  # 16 GB inference card; the demo fleet has none, L4 is its successor
    "A10": "l4",  # 24 GB inference/light training, same tier and memory as L4
    "P100": "a100-40gb",  # 16 GB training cards: any A100 (40 or 80 GB) serves them
    "V100M16": "a100-40gb",
    "V100M32": "a100-40gb",  # 32 GB: needs at least the 40 GB A100
    "G1": "a100-80gb",  # anonymised types of the openb trace; treated as the large
    "G2": "a100-80gb",  # training GPUs of that cluster, hence the 80 GB A100s
    "G3": "a100-80gb",
}
# A job that names no type may run on any A100: the class every cluster of the demo
# fleet has, so unconstrained jobs have the widest choice (as they did in the trace).
UNCONSTRAINED_CLASS = "a100-40gb"
# 'A|B' (any of these) becomes one class, because quota is counted per class: the one
# served by the most clusters, so the alternatives keep as much choice as possible.
CLASS_PREFERENCE = ("a100-40gb", "a100-80gb", "l4", "h100", "t4")


class UnknownGpuType(KeyError):
    """A trace type the table does not map; the job is skipped and counted."""


def class_for(gpu_types: Iterable[str]) -> str:
    """The policy class for a job that accepts any of ``gpu_types`` (empty: any GPU)."""
    wanted = tuple(gpu_types)
    if not wanted:
        return UNCONSTRAINED_CLASS
    unknown = [t for t in wanted if t not in GPU_TYPE_CLASS]
    if unknown:
        raise UnknownGpuType(", ".join(unknown))
    classes = {GPU_TYPE_CLASS[t] for t in wanted}
    return min(classes, key=_preference)


def _preference(gpu_class: str) -> int:
    try:
        return CLASS_PREFERENCE.index(gpu_class)
    except ValueError:
        return len(CLASS_PREFERENCE)


def mapping_rows() -> list[tuple[str, str]]:
    """(trace type, class) for the documentation table."""
    return sorted(GPU_TYPE_CLASS.items()) + [("(none)", UNCONSTRAINED_CLASS)]
