"""The placement record: what a workload's placement decision was, as stored with it.

``Workload.placement`` is a JSON column; this is the one typed view of it.  The placing
service writes it only through ``PlacementRecord.to_json`` and every reader (workload
page, API, wait estimates, withdrawal) goes through ``PlacementRecord.from_json``.  The
JSON keeps the shape rows already hold (same keys, same nesting: ``place_waiting``
filters on ``retry.at`` in the database), and ``from_json`` reads any stored row, older
or damaged ones included: a missing or malformed field reads as its default, never an
error, because a stored decision is history to show, not input to check.  Keys this
module does not know (the MultiKueue dispatcher's nomination) are kept as they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Mapping

from broker.jsontypes import Json, JsonObject

from broker.placement.results import Candidate, Exclusion, PlacementResult

# The stored keys as ORM lookups into ``Workload.placement``, for the reads that take one
# field in the database instead of loading the record (a pass reads them for every job).
CHOSEN_LOOKUP = "placement__chosen"
CHOSEN_POOL_LOOKUP = "placement__chosen__pool"
RETRY_AT_LOOKUP = "placement__retry__at"
RETRY_SINCE_LOOKUP = "placement__retry__since"
MANAGER_LOOKUP = "placement__manager"

KNOWN = frozenset(
    {
        "policy_version",
        "reason",
        "weights",
        "chosen",
        "ranked",
        "excluded",
        "rejections",
        "quota_remaining",
        "burst",
        "onprem_wait_s",
        "predicted_wait_s",
        "retry",
        "manager",
        "nominate",
        "admission_timeout_s",
        "nomination",
    }
)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _texts(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()


def _numbers(value: object) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): n for k, v in value.items() if (n := _number(v)) is not None}


def _count(value: object) -> int:
    """A stored positive whole number, else 1."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


@dataclass(frozen=True)
class RecordedCandidate:
    """One ranked destination: its score and each term, as the decision saw them."""

    cluster: str
    pool: str = ""
    score: float = 0.0
    breakdown: Mapping[str, float] = field(default_factory=dict)  # each term in its unit
    weighted: Mapping[str, float] = field(default_factory=dict)  # normalised x weight
    assignment: tuple[str, ...] = ()  # the node of each worker
    gpus_per_worker: int = 1
    detail: Mapping[str, Json] = field(default_factory=dict)  # staging, egress source, quota wait
    units_per_gpu: int = 1  # the pool's shares per GPU: what one of its units is charged as

    @classmethod
    def of(cls, c: Candidate) -> RecordedCandidate:
        """The library's candidate as stored (its score rounded as ``to_dict`` rounds it).
        Built directly, not through ``to_dict``/``from_json``: a pass records every ranked
        candidate of every workload, and the library's candidate is already typed."""
        return cls(
            cluster=c.cluster,
            pool=c.pool,
            score=round(c.score, 6),
            breakdown=dict(c.breakdown),
            weighted=dict(c.weighted),
            assignment=tuple(c.assignment),
            gpus_per_worker=c.gpus_per_worker,
            detail=dict(c.detail),
            units_per_gpu=c.units_per_gpu,
        )

    @classmethod
    def from_json(cls, data: object) -> RecordedCandidate | None:
        if not isinstance(data, Mapping) or not _text(data.get("cluster")):
            return None
        assignment = data.get("assignment")
        gpus, units = data.get("gpus_per_worker"), data.get("units_per_gpu")
        return cls(
            cluster=data["cluster"],
            pool=_text(data.get("pool")),
            score=_number(data.get("score")) or 0.0,
            breakdown=_numbers(data.get("breakdown")),
            weighted=_numbers(data.get("weighted")),
            assignment=tuple(str(n) for n in assignment) if isinstance(assignment, (list, tuple)) else (),
            gpus_per_worker=_count(gpus),
            detail=dict(data["detail"]) if isinstance(data.get("detail"), Mapping) else {},
            units_per_gpu=_count(units),
        )

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "cluster": self.cluster,
            "pool": self.pool,
            "score": self.score,
            "breakdown": dict(self.breakdown),
            "weighted": dict(self.weighted),
            "assignment": list(self.assignment),
            "gpus_per_worker": self.gpus_per_worker,
            "detail": dict(self.detail),
        }
        if self.units_per_gpu != 1:  # a pool of shares; whole units are the rule and go unsaid
            out["units_per_gpu"] = self.units_per_gpu
        return out


@dataclass(frozen=True)
class RecordedExclusion:
    """Why a cluster was left out: the filter rule and its message with the numbers."""

    rule: str
    message: str = ""

    @classmethod
    def from_json(cls, data: object) -> RecordedExclusion:
        if isinstance(data, Mapping):
            return cls(_text(data.get("rule")), _text(data.get("message")))
        return cls("", _text(data))

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message}


@dataclass(frozen=True)
class Retry:
    """When ``place_waiting`` looks again at a workload that found no place."""

    tries: int
    at: datetime | None
    # when the fruitless look was: a report of changed capacity after it makes the workload
    # due at once, whatever its pause (None on rows written before it was kept)
    since: datetime | None = None

    @classmethod
    def from_json(cls, data: object) -> Retry | None:
        if not isinstance(data, Mapping):
            return None
        tries = data.get("tries")
        return cls(
            tries if isinstance(tries, int) and not isinstance(tries, bool) else 0,
            _when(data, "at"),
            _when(data, "since"),
        )

    def to_json(self) -> JsonObject:
        out: JsonObject = {"tries": self.tries, "at": self.at.isoformat() if self.at else None}
        if self.since is not None:
            out["since"] = self.since.isoformat()
        return out


def _when(data: Mapping[str, object], key: str) -> datetime | None:
    value = data.get(key)
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Nomination:
    """A MultiKueue nomination: the workers as the manager names them, the broker clusters
    they are, when; ``previous`` the nomination it replaced, or ``adopted`` when the broker
    found it on the manager instead of writing it (it died after the write).  A field not
    stored reads as ``None`` and is not written back, so a row keeps its shape."""

    workers: tuple[str, ...]
    clusters: tuple[str, ...] | None = None
    at: datetime | None = None
    previous: tuple[str, ...] | None = None
    adopted: bool = False

    @classmethod
    def from_json(cls, data: object) -> Nomination | None:
        if not isinstance(data, Mapping):
            return None
        try:
            at = datetime.fromisoformat(data["at"]) if isinstance(data.get("at"), str) else None
        except ValueError:
            at = None
        return cls(
            workers=_texts(data.get("workers")),
            clusters=_texts(data["clusters"]) if "clusters" in data else None,
            at=at,
            previous=_texts(data["previous"]) if "previous" in data else None,
            adopted=data.get("adopted") is True,
        )

    def to_json(self) -> JsonObject:
        out: JsonObject = {"workers": list(self.workers)}
        if self.clusters is not None:
            out["clusters"] = list(self.clusters)
        if self.at is not None:
            out["at"] = self.at.isoformat()
        if self.previous is not None:
            out["previous"] = list(self.previous)
        if self.adopted:
            out["adopted"] = True
        return out


@dataclass(frozen=True)
class PlacementRecord:
    policy_version: str = ""
    reason: str = ""  # why nothing was chosen (empty once placed)
    weights: Mapping[str, float] = field(default_factory=dict)
    chosen: RecordedCandidate | None = None
    ranked: tuple[RecordedCandidate, ...] = ()
    excluded: Mapping[str, RecordedExclusion] = field(default_factory=dict)
    rejections: Mapping[str, str] = field(default_factory=dict)  # cluster -> why it refused or lost it
    quota_remaining: int | None = None
    burst: str = ""  # why the cloud was held back ("" when it was not)
    onprem_wait_s: float | None = None
    predicted_wait_s: float | None = None  # at the first decision, kept from then on
    retry: Retry | None = None
    # the MultiKueue dispatcher's: the manager it came from, how many workers a nomination
    # names, how long a worker has to admit it, and the nomination in force
    manager: str = ""
    nominate: int | None = None
    admission_timeout_s: float | None = None
    nomination: Nomination | None = None
    other: Mapping[str, Json] = field(default_factory=dict)  # keys of other writers, as read

    # -- reading and writing -----------------------------------------------------------
    @classmethod
    def from_json(cls, data: object) -> PlacementRecord:
        """Any stored value: a dict of any age, ``None`` or ``{}`` (no decision yet)."""
        if not isinstance(data, Mapping):
            return cls()
        ranked = data.get("ranked")
        excluded = data.get("excluded")
        rejections = data.get("rejections")
        quota = data.get("quota_remaining")
        nominate = data.get("nominate")
        return cls(
            policy_version=_text(data.get("policy_version")),
            reason=_text(data.get("reason")),
            weights=_numbers(data.get("weights")),
            chosen=RecordedCandidate.from_json(data.get("chosen")),
            ranked=tuple(
                c for c in map(RecordedCandidate.from_json, ranked if isinstance(ranked, list) else []) if c is not None
            ),
            excluded={str(k): RecordedExclusion.from_json(v) for k, v in excluded.items()}
            if isinstance(excluded, Mapping)
            else {},
            rejections={str(k): str(v) for k, v in rejections.items()} if isinstance(rejections, Mapping) else {},
            quota_remaining=quota if isinstance(quota, int) and not isinstance(quota, bool) else None,
            burst=_text(data.get("burst")),
            onprem_wait_s=_number(data.get("onprem_wait_s")),
            predicted_wait_s=_number(data.get("predicted_wait_s")),
            retry=Retry.from_json(data.get("retry")),
            manager=_text(data.get("manager")),
            nominate=nominate if isinstance(nominate, int) and not isinstance(nominate, bool) else None,
            admission_timeout_s=_number(data.get("admission_timeout_s")),
            nomination=Nomination.from_json(data.get("nomination")),
            other={k: v for k, v in data.items() if k not in KNOWN},
        )

    def to_json(self) -> JsonObject:
        """The stored shape (the keys rows have always had; chosen and retry when set)."""
        out: JsonObject = {
            **self.other,
            "policy_version": self.policy_version,
            "reason": self.reason,
            "weights": dict(self.weights),
            "ranked": [c.to_json() for c in self.ranked],
            "excluded": self.excluded_json(),
            "quota_remaining": self.quota_remaining,
            "rejections": dict(self.rejections),
            "burst": self.burst,
            "onprem_wait_s": self.onprem_wait_s,
            "predicted_wait_s": self.predicted_wait_s,
        }
        if self.retry is not None:
            out["retry"] = self.retry.to_json()
        if self.chosen is not None:
            out["chosen"] = self.chosen.to_json()
        if self.manager:
            out["manager"] = self.manager
        if self.nominate is not None:
            out["nominate"] = self.nominate
        if self.admission_timeout_s is not None:
            out["admission_timeout_s"] = self.admission_timeout_s
        if self.nomination is not None:
            out["nomination"] = self.nomination.to_json()
        return out

    def excluded_json(self) -> dict[str, dict[str, str]]:
        return {k: v.to_json() for k, v in sorted(self.excluded.items())}

    # -- building ------------------------------------------------------------------------
    @classmethod
    def decided(
        cls,
        result: PlacementResult,
        *,
        policy_version: str,
        ranked: list[Candidate],
        excluded: Mapping[str, Exclusion],
        quota_remaining: int | None = None,
        rejections: Mapping[str, str] | None = None,
        burst: str = "",
        onprem_wait_s: float | None = None,
        predicted_wait_s: float | None = None,
        manager: str = "",
        nominate: int | None = None,
        admission_timeout_s: float | None = None,
    ) -> PlacementRecord:
        """A decision of the placement library, with what the service adds (the keywords)."""
        return cls(
            policy_version=policy_version,
            reason=result.reason,
            weights=dict(result.weights),
            ranked=tuple(RecordedCandidate.of(c) for c in ranked),
            excluded={k: RecordedExclusion(v.rule, v.message) for k, v in excluded.items()},
            quota_remaining=quota_remaining,
            rejections=dict(rejections or {}),
            burst=burst,
            onprem_wait_s=onprem_wait_s,
            predicted_wait_s=predicted_wait_s,
            manager=manager,
            nominate=nominate,
            admission_timeout_s=admission_timeout_s,
        )

    def choosing(self, best: Candidate) -> PlacementRecord:
        return replace(self, chosen=RecordedCandidate.of(best))

    def rejected_by(self, cluster: str, why: str) -> PlacementRecord:
        """The record after ``cluster`` refused the job (or it was withdrawn from there)."""
        return replace(self, rejections={**self.rejections, cluster: why})

    def retrying(
        self, *, earlier: Retry | None, now: datetime, first_s: float, cap_s: float, until: datetime | None = None
    ) -> PlacementRecord:
        """One more fruitless try after ``earlier`` ones: the next look after a pause
        doubling with each try, up to ``cap_s``, and no later than ``until`` (an off-peak
        window's opening: the job starts as it opens)."""
        tries = (earlier.tries if earlier else 0) + 1
        # the doubling is capped before it is computed: a workload waiting for days counts
        # thousands of tries, and 2 ** 1024 is past any float
        pause = min(cap_s, first_s * 2 ** min(tries - 1, 60))
        at = now + timedelta(seconds=pause)
        if until is not None:
            at = max(now, min(at, until))
        return replace(self, retry=Retry(tries, at, since=now))

    @property
    def candidates(self) -> list[str]:
        return [c.cluster for c in self.ranked]

    def over(self, prior: PlacementRecord) -> PlacementRecord:
        """This (MultiKueue) decision written over the ``prior`` record of a workload that
        still waits: what it decided replaces the prior's, what the prior held beyond that
        (rejections, the nomination in force, predictions, other writers' keys) stays, and
        nothing is chosen."""
        return replace(
            prior,
            policy_version=self.policy_version,
            reason=self.reason,
            weights=self.weights,
            ranked=self.ranked,
            excluded=self.excluded,
            quota_remaining=self.quota_remaining,
            manager=self.manager,
            nominate=self.nominate,
            admission_timeout_s=self.admission_timeout_s,
            chosen=None,
        )

    def nominating(self, chosen: tuple[RecordedCandidate, ...], nomination: Nomination) -> PlacementRecord:
        """The record after nominating ``chosen`` (best first) as ``nomination``."""
        return replace(self, chosen=chosen[0], nomination=nomination)

    def excluded_summary(self) -> str:
        """Each excluded cluster and why, by name (what a waiting workload's reason says)."""
        return "; ".join(f"{name}: {e.message}" for name, e in sorted(self.excluded.items()))

    @property
    def nominated_workers(self) -> tuple[str, ...]:
        """The MultiKueue workers of the nomination recorded last (as the manager names them)."""
        return self.nomination.workers if self.nomination is not None else ()
