"""GPU-hour budgets over time: how many GPU-hours of a class a tenant (or one of its
projects) may use in a month or a quarter, across every backend.

The policy (key ``budgets``) lists them.  A budget's standing at a moment is what the ledger
charged in the period so far (every backend's usage, the chargeback's figures), plus what
the work still live holds (each queued or running workload's workers x GPUs x time limit,
returned when it ends: its real use reaches the ledger instead), plus what a new submission
asks.  A ``hard`` budget refuses work that would pass it; a ``soft`` one lets it through and
warns.  Both warn once use and holdings pass ``warn_share`` (default 80%).

Pure: the caller reads the ledger and the live work and passes the figures in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal

PERIODS = ("month", "quarter")
KINDS = ("hard", "soft")
_ZERO = Decimal("0")


@dataclass(frozen=True)
class Budget:
    tenant: str
    gpu_class: str
    gpu_hours: Decimal
    period: str = "month"
    project: str = ""  # "": the whole tenant
    kind: str = "hard"
    warn_share: float = 0.8

    def __post_init__(self) -> None:
        if self.period not in PERIODS:
            raise ValueError(f"period: one of {', '.join(PERIODS)}, not {self.period!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind: one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.gpu_hours <= 0:
            raise ValueError("gpu_hours: more than 0")
        if not 0 < self.warn_share <= 1:
            raise ValueError("warn_share: a share above 0, at most 1")

    @property
    def name(self) -> str:
        """tenant[/project]/class per period: how pages, mail and errors name it."""
        whose = f"{self.tenant}/{self.project}" if self.project else self.tenant
        return f"{whose} {self.gpu_class} per {self.period}"

    def covers(self, *, tenant: str, project: str, gpu_class: str) -> bool:
        return self.tenant == tenant and self.gpu_class == gpu_class and (not self.project or self.project == project)


def period_bounds(period: str, at: datetime) -> tuple[date, date]:
    """The first day of the period holding ``at`` (UTC, as the ledger's months) and the
    first day of the next."""
    at = at.astimezone(timezone.utc)
    months = 3 if period == "quarter" else 1
    first_month = ((at.month - 1) // months) * months + 1
    start = date(at.year, first_month, 1)
    later = first_month - 1 + months
    return start, date(at.year + later // 12, later % 12 + 1, 1)


def elapsed_share(start: date, end: date, at: datetime) -> float:
    """How much of the period has passed at ``at``, 0 to 1."""
    begin = datetime(start.year, start.month, start.day, tzinfo=timezone.utc)
    finish = datetime(end.year, end.month, end.day, tzinfo=timezone.utc)
    share = (at - begin).total_seconds() / (finish - begin).total_seconds()
    return min(max(share, 0.0), 1.0)


@dataclass(frozen=True)
class Standing:
    """A budget at one moment: used (the ledger), held (live work), asked (a new job)."""

    budget: Budget
    start: date
    end: date
    used_hours: Decimal
    held_hours: Decimal
    elapsed: float  # share of the period passed
    asked_hours: Decimal = _ZERO
    used_cost: Decimal = _ZERO  # the ledger's money for the used hours
    rate: Decimal = _ZERO  # the class's price per GPU-hour, for what is not charged yet

    @property
    def committed_hours(self) -> Decimal:
        return self.used_hours + self.held_hours + self.asked_hours

    @property
    def remaining_hours(self) -> Decimal:
        return self.budget.gpu_hours - self.used_hours - self.held_hours

    @property
    def share(self) -> float:
        return float(self.committed_hours / self.budget.gpu_hours)

    @property
    def over(self) -> bool:
        return self.committed_hours > self.budget.gpu_hours

    @property
    def warns(self) -> bool:
        return self.share >= self.budget.warn_share

    @property
    def refuses(self) -> bool:
        return self.over and self.budget.kind == "hard"

    @property
    def forecast_hours(self) -> Decimal:
        """Use at the period's end at the pace of the period so far, never below what is
        used and held now."""
        floor = self.used_hours + self.held_hours
        if self.elapsed <= 0:
            return floor
        paced = (self.used_hours / Decimal(repr(self.elapsed))).quantize(Decimal("0.01"))
        return max(paced, floor)

    @property
    def forecast_over(self) -> bool:
        return self.forecast_hours > self.budget.gpu_hours

    def money(self, gpu_hours: Decimal) -> Decimal:
        return (gpu_hours * self.rate).quantize(Decimal("0.01"))

    def words(self) -> str:
        """The figures a refusal or a warning gives, in one sentence."""
        b = self.budget
        text = (
            f"{b.kind} budget {b.name} ({self.start:%Y-%m-%d} to {self.end:%Y-%m-%d}): "
            f"{b.gpu_hours:,.2f} GPU-hours; used {self.used_hours:,.2f}, "
            f"held by queued and running work {self.held_hours:,.2f}"
        )
        if self.asked_hours:
            text += f", this job asks {self.asked_hours:,.2f}"
        if self.over:
            return text + f": {self.committed_hours - b.gpu_hours:,.2f} over"
        return text + f" ({self.share:.0%} of it)"
