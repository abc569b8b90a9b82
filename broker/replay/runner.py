"""Run a trace through several policies, each on a fresh simulated fleet.

Every policy sees the same jobs (same tenants, gangs, arrival times, durations) on an
identical, empty fleet whose clock starts at the same instant, so the table compares
the policies and nothing else.
"""

from __future__ import annotations

import random
from decimal import Decimal
import re
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

from django.conf import settings

from broker.backends.sim import SimClock, SimulatorFleet
from broker.fleet_file import FleetDescription, build_simulated_clusters, load_fleet
from broker.placement import PRESETS, load_policy_file
from broker.placement.policy import GpuClass, Policy
from broker.replay.baselines import BASELINES as FAIR_BASELINES
from broker.replay.clairvoyant import ClairvoyantFifo
from broker.replay.budgets import budget_figures, tenant_month_spend
from broker.replay.broker_strategy import BrokerPreset, broker_context
from broker.replay.jobs import ReplayJob, Skipped, TimeOptions, prepare
from broker.replay.knobs import Knobs
from broker.replay.local_jobs import DEFAULT_LOCAL_SHARE, mark_local
from broker.replay.loop import ReplayEnv, ReplayRun, Strategy, run_replay
from broker.replay.metrics import Metrics, compute
from broker.replay.production import Skipping, run_production
from broker.replay.priorities import (
    PREEMPT_VARIANT,
    PriorityScenario,
    check_mix,
    mark_priorities,
    scenario_policy_text,
)
from broker.replay.production_broker import ProductionBroker
from broker.replay.simview import FleetView
from broker.replay.synth import SynthOptions, SynthReport, synthesize
from broker.replay.target_load import LoadScaling, scale_to_load
from broker.replay.trace import read_trace
from broker.services.fleet.policy import current_policy
from broker.services.placing.replay_estimates import ReplayEstimateRun
from broker.replay.tracker import Tracker

DEFAULT_POLICIES = (
    "default",
    "cost",
    "first-fit",
    "onprem-first-nogang",
    "multikueue-race",
    "multikueue-incremental",
    "clairvoyant-fifo",
)
BASELINES = {**FAIR_BASELINES, ClairvoyantFifo.name: ClairvoyantFifo}
# old names still accepted on the command line (with a note): the oracle was never a bound
ALIASES = {"oracle": ClairvoyantFifo.name}


def canonical(name: str) -> str:
    """The policy's current name (an old alias maps to it)."""
    return ALIASES.get(name, name)


def policies_asked(raw: str, note: Callable[[str], object]) -> tuple[str, ...]:
    """The comma-separated policies of ``--policies`` by their current names; an old alias is
    mapped, with a note saying so."""
    names = tuple(p.strip() for p in raw.split(",") if p.strip())
    for name in names:
        if canonical(name) != name:
            note(f"--policies: {name!r} is now called {canonical(name)!r} (it was never a bound)")
    return tuple(canonical(name) for name in names)


# The halves (``--half``): the replayable jobs in submit-time order, split at the middle
# job.  first: the half settings may be tuned on (``replay_tune`` reads only it); second:
# the held-out half, reported on and never tuned on; all: the whole trace
WINDOWS = ("all", "first", "second")
# how a broker preset is run: "production", beat's tasks on their intervals and a worker
# (broker/replay/production.py); "instant", the older harness that syncs right before
# placing and offers a job only where the simulator says it fits now (broker_strategy.py)
LOOPS = ("production", "instant")
LOCAL_QUEUEING = "backfill"  # what real local schedulers do by default
# A fixed origin: the same trace gives the same timestamps in every run.
ORIGIN = datetime(2023, 1, 1, tzinfo=timezone.utc)


BURST_VARIANT = re.compile(r"^default\+burst(\d+)m$")
# not a policy: the sweep's row for the lower bound on the mean wait of the broker's jobs in
# the cell (lower_bound.py), computed from the jobs and the fleet, nothing replayed
LOWER_BOUND = "lower-bound"


def known_policies() -> list[str]:
    return ["default", "default+burst<N>m", PREEMPT_VARIANT, *PRESETS, *BASELINES, LOWER_BOUND]


def is_known(name: str) -> bool:
    name = canonical(name)
    known = ("default", PREEMPT_VARIANT, *PRESETS, *BASELINES, LOWER_BOUND)
    return name in known or bool(BURST_VARIANT.match(name))


def burst_policy_text(minutes: int) -> str:
    """The policy in force with the spend-aware burst rule set: the cloud only when the
    predicted on-prem wait passes ``minutes``."""
    return current_policy().text + f"\nburst:\n  min_onprem_wait_s: {minutes * 60}\n"


def make_strategy(
    name: str, fleet: FleetDescription, knobs: Knobs | None = None, scenario: PriorityScenario | None = None
) -> Strategy:
    """'default' (the policy file as it stands, with the tuned ``knobs`` overlaid when
    given), 'default+burst<N>m' (the file with the cloud only after a predicted on-prem
    wait of N minutes), 'default+preempt' (the file with the broker owning preemption), a
    preset name, or a baseline.  ``scenario``: the priority scenario's minimum shares and
    preemptible priorities, set in the policy-file ones (``broker/replay/priorities.py``)."""
    variant = BURST_VARIANT.match(name)
    if name in ("default", PREEMPT_VARIANT) or variant:
        if variant:
            text: str | None = burst_policy_text(int(variant.group(1)))
        else:
            text = knobs.policy_text(current_policy().text) if knobs else None
        if name == PREEMPT_VARIANT or scenario:
            text = scenario_policy_text(
                text or current_policy().text, preempt=name == PREEMPT_VARIANT, scenario=scenario or PriorityScenario()
            )
        return BrokerPreset(name, fleet, policy_text=text)
    if name in PRESETS:
        return BrokerPreset(name, fleet, preset=name)
    if canonical(name) in BASELINES:
        return BASELINES[canonical(name)]()
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(known_policies())}")


@dataclass(frozen=True)
class ReplayConfig:
    trace: Path
    fleet: Path
    policies: tuple[str, ...] = DEFAULT_POLICIES
    synth: SynthOptions = field(default_factory=SynthOptions)
    time: TimeOptions = field(default_factory=TimeOptions)
    limit: int | None = None
    window: str = "all"
    queueing: str = LOCAL_QUEUEING
    knobs: Knobs | None = None  # the tuned knobs of ``default`` (None: the policy file)
    local_share: float = DEFAULT_LOCAL_SHARE  # of the jobs, submitted locally (local_jobs.py)
    loop: str = "production"  # how the broker's presets run (LOOPS)
    cloud_budget: float | None = None  # each broker tenant's monthly cloud budget (None: none)
    every_tick: bool = False  # the production loop without the harness's shortcuts (slower)
    target_load: float | None = None  # on-prem nodes scaled to this load (target_load.py)
    # the priority scenario (priorities.py): fleet priority classes drawn over the jobs, the
    # replay tenants' guaranteed minimum shares, the priorities preemption may take
    scenario: PriorityScenario = field(default_factory=PriorityScenario)

    def __post_init__(self) -> None:
        if self.window not in WINDOWS:
            raise ValueError(f"window: one of {', '.join(WINDOWS)}")
        if self.cloud_budget is not None and not self.cloud_budget >= 0:
            raise ValueError(f"cloud_budget: a sum of money, 0 or more, got {self.cloud_budget}")
        if self.loop not in LOOPS:
            raise ValueError(f"loop: one of {', '.join(LOOPS)}")
        if self.loop == "instant" and PREEMPT_VARIANT in self.policies:
            raise ValueError(
                f"loop: {PREEMPT_VARIANT} needs the production loop (the instant one runs no preemption pass)"
            )
        if not 0.0 <= self.local_share < 1.0:
            raise ValueError(f"local_share: from 0 up to (not including) 1, got {self.local_share}")


@dataclass
class ReplayReport:
    config: ReplayConfig
    rows: int
    jobs: list[ReplayJob]
    skipped: Skipped
    synth: SynthReport
    fleet: FleetDescription
    metrics: list[Metrics] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per policy
    scaling: LoadScaling | None = None  # how the fleet was scaled to ``config.target_load``
    classes: Mapping[str, GpuClass] = field(default_factory=dict)  # the policy's GPU classes


def load_jobs(config: ReplayConfig, policy: Policy | None = None) -> tuple[int, list[ReplayJob], Skipped, SynthReport]:
    rows = read_trace(config.trace, limit=config.limit)
    rows, synth = synthesize(rows, config.synth)
    policy = policy or replay_policy()
    jobs, skipped = prepare(rows, policy.gpu_classes, config.time)
    marked = mark_local(window_of(jobs, config.window), config.local_share, config.synth.seed)
    check_mix(config.scenario.mix, tuple(policy.priority_classes))
    return len(rows), mark_priorities(marked, config.scenario.mix, config.synth.seed), skipped, synth


def replay_policy() -> Policy:
    """The policy file: the trace replay's own database is seeded from it, so the replay's
    jobs and its broker read the same GPU classes."""
    return load_policy_file(str(settings.GPUBROKER_POLICY_FILE))


def window_of(jobs: Sequence[ReplayJob], window: str) -> list[ReplayJob]:
    """The first or second half of the jobs by arrival, rebased so the first arrives at 0.

    The split is made after the synthetic mix is drawn over the whole trace, so a job
    has the same tenant and gang shape whichever window it is replayed in."""
    if window == "all" or not jobs:
        return list(jobs)
    half = len(jobs) // 2
    part = list(jobs[:half]) if window == "first" else list(jobs[half:])
    origin = part[0].submit_s if part else 0.0
    return [replace(j, submit_s=j.submit_s - origin) for j in part]


def run_policies(config: ReplayConfig, progress: Callable[[str], None] | None = None) -> ReplayReport:
    """Replay the trace under each policy; needs a database for the broker's presets.  The
    lower bound is no policy: nothing is replayed for it (every table states it)."""
    replayed = [name for name in config.policies if name != LOWER_BOUND]
    for name in replayed:
        make_strategy(name, FleetDescription(clusters=()))  # fail before any work
    fleet = load_fleet(config.fleet)
    policy = replay_policy()
    rows, jobs, skipped, synth = load_jobs(config, policy)
    scaling = scale_to_load(jobs, fleet, config.target_load) if config.target_load is not None else None
    fleet = scaling.fleet if scaling else fleet
    report = ReplayReport(config, rows, jobs, skipped, synth, fleet, scaling=scaling, classes=policy.gpu_classes)
    for name in replayed:
        began = time.perf_counter()
        metrics = run_one(
            name,
            jobs,
            fleet,
            seed=config.synth.seed,
            queueing=config.queueing,
            knobs=config.knobs,
            loop=config.loop,
            cloud_budget=config.cloud_budget,
            skipping=Skipping(on=not config.every_tick),
            scenario=config.scenario,
        )
        report.metrics.append(metrics)
        report.seconds[name] = time.perf_counter() - began
        if progress:
            progress(f"{name}: {report.seconds[name]:.1f} s")
    return report


def run_one(
    name: str,
    jobs: Sequence[ReplayJob],
    fleet: FleetDescription,
    seed: int,
    strategy: Strategy | None = None,
    queueing: str = LOCAL_QUEUEING,
    knobs: Knobs | None = None,
    loop: str = "production",
    cloud_budget: float | None = None,
    skipping: Skipping | None = None,
    scenario: PriorityScenario | None = None,
) -> Metrics:
    """One policy on a fresh simulated fleet (the process-wide one is replaced)."""
    run = replay_run(name, jobs, fleet, seed, strategy, queueing, knobs, loop, skipping, cloud_budget, scenario)
    return compute(run, fleet)


def replay_run(
    name: str,
    jobs: Sequence[ReplayJob],
    fleet: FleetDescription,
    seed: int,
    strategy: Strategy | None = None,
    queueing: str = LOCAL_QUEUEING,
    knobs: Knobs | None = None,
    loop: str = "production",
    skipping: Skipping | None = None,
    cloud_budget: float | None = None,
    scenario: PriorityScenario | None = None,
) -> ReplayRun:
    """The raw run (outcomes per job, usage per cluster) behind ``run_one``; the local
    queues backfill unless ``queueing`` is "strict"; ``cloud_budget``: every broker tenant's
    monthly cloud budget (the baselines know none)."""
    settings = RunSettings(queueing, knobs, loop, skipping, cloud_budget, scenario)
    run = _replay(name, jobs, fleet, seed, strategy, settings)
    spend = tenant_month_spend(run.outcomes.values(), fleet, ORIGIN)
    run.extra.update(budget_figures(spend, cloud_budget))
    return run


@dataclass(frozen=True)
class RunSettings:
    """How one policy's run is played, beside its jobs, fleet and seed: the local queues'
    queueing, the preset's knobs, the broker's loop, which passes may be skipped, and every
    broker tenant's monthly cloud budget."""

    queueing: str
    knobs: Knobs | None
    loop: str
    skipping: Skipping | None
    cloud_budget: float | None
    scenario: PriorityScenario | None = None


def _replay(
    name: str,
    jobs: Sequence[ReplayJob],
    fleet: FleetDescription,
    seed: int,
    strategy: Strategy | None,
    settings: RunSettings,
) -> ReplayRun:
    clock = SimClock(origin=ORIGIN)
    sim = SimulatorFleet.reset(clock=clock)
    for cluster in build_simulated_clusters(fleet, sim):
        cluster.queueing = settings.queueing
    view = FleetView(sim, fleet)
    env = ReplayEnv(sim=sim, view=view, tracker=Tracker(view), rng=random.Random(seed), seed=seed)
    strategy = strategy or make_strategy(name, fleet, settings.knobs, settings.scenario)
    cloud_budget = settings.cloud_budget
    budget = None if cloud_budget is None else Decimal(str(cloud_budget)).quantize(Decimal("0.01"))
    if isinstance(strategy, BrokerPreset) and settings.loop == "production":
        broker = ProductionBroker(
            strategy.name, fleet, strategy.preset, strategy.policy_text, strategy.tenant_prefix, budget
        )
        with broker_context(clock, broker.preset, broker.policy_text, task_sink=broker.sink):
            return run_production(jobs, broker, env, settings.skipping)
    if isinstance(strategy, BrokerPreset):
        strategy.cloud_budget = budget
        with broker_context(clock, strategy.preset, strategy.policy_text):
            return run_replay(jobs, strategy, env)
    return run_replay(jobs, strategy, env)


def estimator_runs(report: ReplayReport) -> list[ReplayEstimateRun]:
    """What the report's broker presets measured of their wait estimator, to record."""
    config = report.config
    return [
        ReplayEstimateRun(
            trace=config.trace.name,
            half=config.window,
            time_compress=config.time.time_compress,
            seed=config.synth.seed,
            policy=m.policy,
            jobs=len(report.jobs),
            report=m.estimator,
        )
        for m in report.metrics
        if m.estimator is not None
    ]
