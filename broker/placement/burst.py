"""Spend-aware bursting: when a job may go to the cloud instead of waiting for on-prem.

Rules (policy key ``burst``):

* cloud is used only when the predicted on-prem wait passes ``min_onprem_wait_s`` (the
  learned estimate of the best on-prem cluster that could ever run the job; none could:
  the cloud is the only choice).  0 turns the rule off;
* and only while the tenant's monthly cloud budget allows this job: spend this month plus
  the job's expected cloud cost, with egress added as a share of GPU cost
  (``egress_uplift``: 15-30% is the usual figure), must stay within the budget;
* the usual cloud-burst rule of thumb: once the site's cloud spend this month reaches
  ``reassess_share`` (60-70%) of what owning the on-prem GPUs costs in a month (at the
  on-prem TCO rates), buying GPUs is worth reassessing; until then the burst threshold
  doubles, so only long on-prem waits justify more cloud spend;
* per tenant, once its cloud spend in a month (egress included, from the ledger) passes
  ``reassess_share`` of what the same GPU-hours cost on-prem at TCO rates, finance and its
  admins are told (``accounting.services.cloud_tco``), and ``over_tco`` says what bursting
  does for that tenant for the rest of the month: ``warn`` (nothing more) or ``stop`` (no
  new cloud placements).

Pure: the caller reads spend, budget and TCO from accounting and the wait from the
estimator, and applies the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MIN_ONPREM_WAIT_S = 0.0
OVER_TCO_ACTIONS = ("warn", "stop")


@dataclass(frozen=True)
class Burst:
    min_onprem_wait_s: float = DEFAULT_MIN_ONPREM_WAIT_S
    egress_uplift: float = 0.2
    reassess_share: float = 0.65
    over_tco: str = "warn"

    def __post_init__(self) -> None:
        if self.min_onprem_wait_s < 0:
            raise ValueError("burst.min_onprem_wait_s: must be 0 or more")
        if not 0 <= self.egress_uplift <= 1:
            raise ValueError("burst.egress_uplift: a share between 0 and 1")
        if not 0 < self.reassess_share <= 1:
            raise ValueError("burst.reassess_share: a share above 0, at most 1")
        if self.over_tco not in OVER_TCO_ACTIONS:
            raise ValueError(f"burst.over_tco: one of {', '.join(OVER_TCO_ACTIONS)}, not {self.over_tco!r}")


@dataclass(frozen=True)
class BurstVerdict:
    allowed: bool
    reason: str = ""


def cloud_cost(gpu_cost: float, rule: Burst) -> float:
    """Expected cloud cost of a job: GPU cost with egress on top."""
    return gpu_cost * (1.0 + rule.egress_uplift)


def reassess_due(rule: Burst, cloud_spend: float, onprem_tco: float) -> bool:
    """Cloud spend has reached the share of on-prem TCO where owning GPUs is cheaper."""
    return onprem_tco > 0 and cloud_spend >= rule.reassess_share * onprem_tco


def cloud_verdict(
    rule: Burst,
    *,
    onprem_wait_s: float | None,
    gpu_cost: float,
    budget: float | None,
    spent: float,
    reassess: bool = False,
) -> BurstVerdict:
    """May this job burst to the cloud now?"""
    cost = cloud_cost(gpu_cost, rule)
    if budget is not None and spent + cost > budget:
        return BurstVerdict(
            False,
            f"cloud budget: {spent:,.2f} spent this month + {cost:,.2f} "
            f"expected (egress included) passes {budget:,.2f}",
        )
    threshold = rule.min_onprem_wait_s * (2.0 if reassess else 1.0)
    if onprem_wait_s is not None and onprem_wait_s < threshold:
        why = " (doubled: cloud spend passed the TCO reassessment share)" if reassess else ""
        return BurstVerdict(
            False,
            f"on-prem expected in {onprem_wait_s / 60:,.0f} min, under "
            f"the burst threshold of {threshold / 60:,.0f} min{why}",
        )
    return BurstVerdict(True)
