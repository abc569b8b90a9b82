"""Off-peak windows: when a site's GPUs may run work that asked to start off-peak.

The policy (key ``off_peak``) gives each site, named by a region or region family as
``residency`` does, a daily window in the site's own time zone (``start`` to ``end``; an
``end`` at or before ``start`` runs past midnight, equal ones make the whole day off-peak),
and whether weekends are off-peak all day.  A workload starts off-peak when it asks to
(``spec.off_peak``), or when the policy requires it of batch work above a size.  Off-peak
work starts only on a cluster whose site's window is open at the moment of the decision;
a site with no window never starts it.  Pure: the engine passes the moment in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from typing import Mapping
from zoneinfo import ZoneInfo

from broker.placement.facts import ClusterFacts, region_matches
from broker.placement.results import Exclusion
from broker.spec import WorkloadSpec

_SATURDAY = 5


@dataclass(frozen=True)
class Window:
    site: str  # a region or region family ('eu' covers 'eu-west'); '*' every site
    start: time
    end: time
    timezone: str = "UTC"
    weekends: bool = False  # Saturday and Sunday are off-peak all day

    def is_open(self, now: datetime) -> bool:
        local = now.astimezone(ZoneInfo(self.timezone))
        if self.weekends and local.weekday() >= _SATURDAY:
            return True
        at = local.time().replace(tzinfo=None)
        if self.start == self.end:
            return True
        if self.start < self.end:
            return self.start <= at < self.end
        return at >= self.start or at < self.end  # past midnight

    def opens(self, now: datetime) -> datetime:
        """The next moment at or after ``now`` when the window is open."""
        if self.is_open(now):
            return now
        zone = ZoneInfo(self.timezone)
        local = now.astimezone(zone)
        day = local.date()
        for ahead in range(8):  # within a week, a window opens (the start time daily)
            date = day + timedelta(days=ahead)
            starts = [datetime.combine(date, self.start, tzinfo=zone)]
            if self.weekends and date.weekday() >= _SATURDAY:
                starts.append(datetime.combine(date, time(0, 0), tzinfo=zone))
            later = [s for s in starts if s > local]
            if later:
                return min(later).astimezone(timezone.utc)
        raise AssertionError("a daily window opens within a week")  # start is daily

    def describe(self) -> str:
        if self.start == self.end:
            return f"all day ({self.timezone})"
        days = ", weekends all day" if self.weekends else ""
        return f"{self.start:%H:%M}-{self.end:%H:%M} {self.timezone}{days}"


@dataclass(frozen=True)
class OffPeak:
    windows: tuple[Window, ...] = ()
    # batch work (the priorities below) larger than this many GPUs must start off-peak;
    # 0: never required
    required_above_gpus: int = 0
    required_priorities: tuple[str, ...] = ("low", "normal")

    def required_of(self, spec: WorkloadSpec) -> bool:
        return 0 < self.required_above_gpus < spec.total_gpus and spec.priority in self.required_priorities

    def applies(self, spec: WorkloadSpec) -> bool:
        return spec.off_peak or self.required_of(spec)

    def window_for(self, region: str) -> Window | None:
        """The most specific window whose site covers ``region`` ('*' last)."""
        best: Window | None = None
        for window in self.windows:
            site = window.site
            if region_matches(region, (site,)):
                if best is None or best.site == "*" or (site != "*" and len(site) > len(best.site)):
                    best = window
        return best

    def why(self, spec: WorkloadSpec) -> str:
        if spec.off_peak:
            return "it asked to start off-peak"
        return (
            f"the policy starts {spec.priority}-priority work above {self.required_above_gpus} GPUs "
            f"off-peak ({spec.total_gpus} GPUs)"
        )


def closed_now(
    rule: OffPeak, facts: Mapping[str, ClusterFacts], spec: WorkloadSpec, now: datetime
) -> dict[str, tuple[Exclusion, datetime | None]]:
    """The clusters an off-peak workload may not start on at ``now``, each with why and
    when its site's window opens (None: the site has no window)."""
    if not rule.applies(spec):
        return {}
    out: dict[str, tuple[Exclusion, datetime | None]] = {}
    why = rule.why(spec)
    for name, fact in facts.items():
        window = rule.window_for(fact.region)
        if window is None:
            # never here: a policy rule, as a region the tenant may not use
            message = f"{why}, and region {fact.region or '(none)'} has no off-peak window"
            out[name] = (Exclusion("policy", message), None)
            continue
        opens = window.opens(now)
        if opens > now:
            out[name] = (Exclusion("off_peak", _waits(why, fact.region, window, opens, now)), opens)
    return out


def _waits(why: str, region: str, window: Window, opens: datetime, now: datetime) -> str:
    minutes = round((opens - now).total_seconds() / 60)
    hours, mins = divmod(minutes, 60)
    after = f"{hours} h {mins} min" if hours else f"{mins} min"
    return (
        f"{why}: the off-peak window at {region or '(no region)'} ({window.describe()}) "
        f"opens at {opens:%Y-%m-%d %H:%M} UTC, in {after}"
    )


def next_opening(closed: Mapping[str, tuple[Exclusion, datetime | None]]) -> datetime | None:
    times = [opens for _, opens in closed.values() if opens is not None]
    return min(times) if times else None
