"""Fill in what a trace lacks: tenants, and multi-worker gangs.

The Alibaba openb trace has one row per pod, no user and no job grouping, so it says
nothing about gangs, which are what make placement hard (the whole gang must fit on one
cluster's nodes at once).  The generator gives such traces a tenant mix and turns a
fraction of GPU jobs into gangs, from a seeded RNG so a replay can be repeated exactly;
the seed and what was added go into the report and the table header.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Sequence

from broker.replay.trace import TraceRow

# (workers, GPUs per worker, weight).  At most 16 GPUs per gang: the largest job the demo
# fleet's Slurm QoS and Kueue quotas admit, so every gang can run somewhere.
DEFAULT_GANG_MIX: tuple[tuple[int, int, float], ...] = ((2, 2, 3.0), (2, 4, 3.0), (4, 2, 2.0), (4, 4, 2.0))
_SLUG_BAD = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class SynthOptions:
    seed: int = 7
    tenants: int = 6  # synthetic tenants for rows without one
    gang_fraction: float = 0.1  # of GPU jobs, when the trace has no gangs
    gang_mix: tuple[tuple[int, int, float], ...] = DEFAULT_GANG_MIX

    def __post_init__(self) -> None:
        if self.tenants < 1:
            raise ValueError("tenants: need at least one")
        if not 0.0 <= self.gang_fraction <= 1.0:
            raise ValueError("gang_fraction: must be between 0 and 1")
        if not self.gang_mix or any(w < 2 or g < 1 or p <= 0 for w, g, p in self.gang_mix):
            raise ValueError("gang_mix: (workers >= 2, gpus >= 1, weight > 0) entries")


@dataclass(frozen=True)
class SynthReport:
    seed: int
    tenants_added: int  # rows that got a synthetic tenant
    gangs_added: int  # GPU jobs turned into gangs
    gang_fraction: float  # 0 when the trace had gangs of its own
    tenants: tuple[str, ...]  # every tenant in the result

    def describe(self) -> str:
        gangs = (
            f"{self.gangs_added} GPU jobs made gangs ({self.gang_fraction:.0%} mix)"
            if self.gang_fraction
            else "gangs as in the trace"
        )
        return f"seed {self.seed}; {len(self.tenants)} tenants; {gangs}"


def tenant_slug(name: str) -> str:
    """A trace's tenant name as a tenant slug (lower case, digits and '-')."""
    slug = _SLUG_BAD.sub("-", name.lower()).strip("-")
    return slug[:30] or "unnamed"


def synthesize(rows: Sequence[TraceRow], options: SynthOptions) -> tuple[list[TraceRow], SynthReport]:
    """Rows with tenants everywhere and, if the trace has no gangs, a gang mix.

    One RNG, drawn in row order and the same number of draws per row: the first N rows
    come out the same whatever follows them, so a ``--limit`` run replays a prefix of
    the full run's jobs."""
    rng = random.Random(options.seed)
    add_gangs = not any(r.workers > 1 for r in rows) and options.gang_fraction > 0
    out = [_draw(row, rng, options, add_gangs) for row in rows]
    report = SynthReport(
        seed=options.seed,
        tenants_added=sum(not r.tenant for r in rows),
        gangs_added=sum(a.workers != r.workers for a, r in zip(out, rows, strict=True)),
        gang_fraction=options.gang_fraction if add_gangs else 0.0,
        tenants=tuple(sorted({r.tenant for r in out})),
    )
    return out, report


def _draw(row: TraceRow, rng: random.Random, options: SynthOptions, add_gangs: bool) -> TraceRow:
    names = [f"t{i + 1}" for i in range(options.tenants)]
    weights = [1.0 / (i + 1) for i in range(options.tenants)]  # Zipf: a few big tenants
    drawn = rng.choices(names, weights)[0]  # drawn for every row: stable prefixes
    changes: dict[str, object] = {"tenant": tenant_slug(row.tenant) if row.tenant else drawn}
    if add_gangs and row.gpus_per_worker > 0:
        hit = rng.random() < options.gang_fraction
        shape = rng.choices([(w, g) for w, g, _ in options.gang_mix], [p for _, _, p in options.gang_mix])[0]
        if hit:
            changes["workers"], changes["gpus_per_worker"] = shape
    return replace(row, **changes)  # type: ignore[arg-type]
