"""RestTransport: slurmrestd with JWT (``X-SLURM-USER-NAME`` / ``X-SLURM-USER-TOKEN``).

The API version is given ("v0.0.38" on Slurm 22.05, "v0.0.42" on 24.11) or
detected ("auto": the highest ``/slurm/v0.0.N/`` path the server's OpenAPI document
lists that this module knows).  Request bodies come from mapping.rest_job_body, replies
are read by parsers.*_from_json, which accept both the v0.0.38 and the v0.0.39+
shapes.
"""

from __future__ import annotations

import getpass
import os
import re
import threading
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Sequence

import requests

from broker.cluster_report import NodeLevels
from broker.backends.base import Rejected, Unavailable
from broker.backends.slurm import parsers
from broker.backends.slurm import json_records, limits_json
from broker.backends.slurm.commands import since_arg
from broker.backends.slurm.limits import PartitionRow, Row
from broker.backends.slurm.mapping import SubmitRequest, rest_job_body
from broker.backends.slurm.outcome import SlurmEnd, end_from_json
from broker.backends.slurm.transport import Association, SlurmAcct, SlurmJob, SlurmNode

SUPPORTED_MIN, SUPPORTED_MAX = 38, 45
_NOTHING_FOUND = 9003  # slurmdbd: "Nothing found with query"
_INVALID_JOB = 2017  # ESLURM_INVALID_JOB_ID
_ALREADY_DONE = 2021  # ESLURM_ALREADY_DONE


def read_token(token_ref: str | Callable[[], str]) -> str:
    """``env:NAME`` (default ``env:SLURM_JWT``), ``file:/path``, a callable, or the token."""
    if callable(token_ref):
        return token_ref().strip()
    if token_ref.startswith("env:"):
        value = os.environ.get(token_ref[4:], "")
        if not value:
            raise Unavailable(f"no Slurm token in ${token_ref[4:]}")
        return value.strip()
    if token_ref.startswith("file:"):
        try:
            with open(token_ref[5:], encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError as exc:
            raise Unavailable(f"cannot read the Slurm token: {exc}") from exc
    return token_ref.strip()


class RestTransport:
    name = "rest"

    def __init__(
        self,
        url: str,
        token_ref: str | Callable[[], str] = "env:SLURM_JWT",
        api_version: str = "auto",
        *,
        user_name: str | None = None,
        timeout_s: float = 30.0,
        session: requests.Session | None = None,
    ):
        self.url = url.rstrip("/")
        self.token_ref = token_ref
        self._api = "" if api_version in ("", "auto") else "v" + api_version.lstrip("v")
        self.user_name = user_name or os.environ.get("SLURM_REST_USER") or getpass.getuser()
        self.timeout_s = timeout_s
        self.session = session or requests.Session()
        self._lock = threading.Lock()

    # ------------------------------------------------------------ plumbing
    @property
    def api_version(self) -> str:
        if not self._api:
            with self._lock:
                if not self._api:
                    self._api = self.detect_api_version()
        return self._api

    def offered_api_versions(self) -> list[str]:
        """The ``/slurm/v0.0.N/`` APIs the server's OpenAPI document lists that this module
        speaks, oldest first (22.05: v0.0.38; 24.11: v0.0.40-v0.0.42; 26.05: v0.0.42-v0.0.45)."""
        doc = self._request("GET", "/openapi/v3", versioned=False)
        found = set()
        for path in doc.get("paths") or {}:
            m = re.match(r"^/slurm/v0\.0\.(\d+)/", path)
            if m and SUPPORTED_MIN <= int(m.group(1)) <= SUPPORTED_MAX:
                found.add(int(m.group(1)))
        return [f"v0.0.{n}" for n in sorted(found)]

    def detect_api_version(self) -> str:
        """The newest API the server offers and this module speaks."""
        offered = self.offered_api_versions()
        if not offered:
            raise Unavailable("slurmrestd lists no supported /slurm/v0.0.N/ API")
        return offered[-1]

    def _headers(self, as_user: str = "") -> dict[str, str]:
        # as_user: impersonation; slurmctld accepts another name only with a token of
        # SlurmUser (or root), which is what user_name/token_ref are then
        return {
            "X-SLURM-USER-NAME": as_user or self.user_name,
            "X-SLURM-USER-TOKEN": read_token(self.token_ref),
            "Accept": "application/json",
        }

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        versioned: bool = True,
        ok_codes: Iterable[int] = (),
        as_user: str = "",
    ) -> dict[str, Any]:
        """One call; the decoded reply.  Errors the reply lists with a code in
        ``ok_codes`` are not errors.  Raises Unavailable for everything that is not a
        clear answer."""
        try:
            resp = self.session.request(
                method,
                self.url + path,
                json=json,
                params=params,
                headers=self._headers(as_user),
                timeout=self.timeout_s,
            )
        except requests.RequestException as exc:
            raise Unavailable(f"slurmrestd {method} {path}: {exc}") from exc
        try:
            payload = resp.json()
        except ValueError:
            payload = None
        errors = parsers.rest_errors(payload)
        bad = [(c, t) for c, t in errors if c not in set(ok_codes)]
        if resp.status_code in (401, 403):
            raise Unavailable(f"slurmrestd {method} {path}: HTTP {resp.status_code} (token or user refused)")
        if payload is None:
            raise Unavailable(f"slurmrestd {method} {path}: HTTP {resp.status_code}, not JSON: {resp.text[:200]!r}")
        if resp.status_code >= 400 and not bad and errors:
            return payload  # only "nothing found"-style errors
        if resp.status_code >= 400 or bad:
            text = "; ".join(f"{t} ({c})" for c, t in bad) or f"HTTP {resp.status_code}"
            raise _RestError(resp.status_code, bad, f"slurmrestd {method} {path}: {text}", payload)
        return payload

    def _slurm(self, tail: str) -> str:
        return f"/slurm/{self.api_version}/{tail}"

    def _slurmdb(self, tail: str) -> str:
        return f"/slurmdb/{self.api_version}/{tail}"

    # ------------------------------------------------------------ Transport
    def submit(self, request: SubmitRequest) -> str:
        body = rest_job_body(request, self.api_version)
        try:
            payload = self._request("POST", self._slurm("job/submit"), json=body, as_user=request.run_as_user)
        except _RestError as exc:
            job_id = parsers.number((exc.payload or {}).get("job_id"), 0)
            if job_id and exc.status < 400:
                # the job exists; 22.05 lists e.g. "Job is in held state" (2042) as an error
                return str(job_id)
            rejections = [(c, t) for c, t in exc.errors if parsers.rest_error_is_rejection(c, t)]
            if rejections and len(rejections) == len(exc.errors):
                text = "; ".join(t for _, t in rejections)
                raise Rejected(text, raw=str(exc)) from exc
            raise Unavailable(str(exc)) from exc
        job_id = parsers.number(payload.get("job_id"), 0)
        if not job_id:
            raise Unavailable(f"slurmrestd gave no job id: {payload!r:.300}")
        return str(job_id)

    def _get(self, path: str, **kw: Any) -> dict[str, Any]:
        try:
            return self._request("GET", path, **kw)
        except _RestError as exc:
            raise Unavailable(str(exc)) from exc

    def jobs(
        self,
        *,
        job_ids: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        states: Iterable[str] | None = None,
    ) -> list[SlurmJob]:
        if job_ids is not None and not job_ids:
            return []
        # the API has no server-side filter by id list or name: read all, filter here
        payload = self._get(self._slurm("jobs"))
        ids = {str(j) for j in job_ids} if job_ids else None
        names_set = set(names) if names else None
        states_set = {s.upper() for s in states} if states else None
        out = []
        for raw in payload.get("jobs") or ():
            job = json_records.job_from_json(raw)
            if ids is not None and job.job_id not in ids:
                continue
            if names_set is not None and job.name not in names_set:
                continue
            if states_set is not None and job.state not in states_set:
                continue
            out.append(job)
        return out

    def nodes(self) -> list[SlurmNode]:
        payload = self._get(self._slurm("nodes"))
        return [json_records.node_from_json(n) for n in payload.get("nodes") or ()]

    def topology(self) -> NodeLevels:
        """Not read over REST: the backend reads topology with ``scontrol show topology``
        only, so a cluster reached over REST alone shows no levels (docs/topology.md)."""
        return {}

    def accounting(
        self,
        *,
        since: datetime | None = None,
        job_ids: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        every_run: bool = False,
    ) -> Iterator[SlurmAcct]:
        if job_ids is not None and not job_ids:
            return iter(())
        if job_ids:
            return self._acct_by_id(job_ids, names)
        # every_run is not asked for: 22.05's v0.0.38 refuses show_duplicates ("Unknown Query
        # field"), so a requeued job's earlier runs are read through sacct only (docs/slurm.md)
        params: dict[str, Any] = {"start_time": since_arg(since), "skip_steps": "true"}
        if names:
            params["job_name"] = ",".join(names)
        payload = self._get(self._slurmdb("jobs"), params=params, ok_codes=(_NOTHING_FOUND,))
        return (json_records.acct_from_json(j) for j in payload.get("jobs") or ())

    def _acct_by_id(self, job_ids: Sequence[str], names: Sequence[str] | None) -> Iterator[SlurmAcct]:
        for job_id in job_ids:
            payload = self._get(self._slurmdb(f"job/{job_id}"), ok_codes=(_NOTHING_FOUND,))
            for raw in payload.get("jobs") or ():
                rec = json_records.acct_from_json(raw)
                if not names or rec.name in names:
                    yield rec

    def cancel(self, job_id: str) -> None:
        try:
            self._request("DELETE", self._slurm(f"job/{job_id}"), ok_codes=(_INVALID_JOB, _ALREADY_DONE))
        except _RestError as exc:
            text = str(exc).lower()
            if "already completing or completed" in text or "invalid job id" in text:
                return
            raise Unavailable(str(exc)) from exc

    def job_ends(self, job_ids: Sequence[str]) -> dict[str, SlurmEnd]:
        """From slurmctld while it holds the job (22.05's slurmdbd record has no true exit
        code, see outcome.py), else from slurmdbd."""
        ends: dict[str, SlurmEnd] = {}
        for job_id in job_ids:
            for path in (self._slurm(f"job/{job_id}"), self._slurmdb(f"job/{job_id}")):
                payload = self._get(path, ok_codes=(_NOTHING_FOUND, _INVALID_JOB))
                found = [end_from_json(j) for j in payload.get("jobs") or ()]
                found = [e for e in found if e.job_id == str(job_id) and e.state]
                if found:
                    ends[str(job_id)] = found[0]
                    break
        return ends

    def limit_rows(self) -> tuple[list[Row], list[Row], list[PartitionRow]]:
        """slurmdbd's QoS and associations and slurmctld's partitions (``limits_json``): the
        REST side of ``limits.read_limits``."""
        return (
            limits_json.qos_rows(self._get(self._slurmdb("qos"), ok_codes=(_NOTHING_FOUND,))),
            limits_json.association_rows(self._get(self._slurmdb("associations"), ok_codes=(_NOTHING_FOUND,))),
            limits_json.partition_rows(self._get(self._slurm("partitions"))),
        )

    def associations(self, account: str) -> list[Association]:
        payload = self._get(self._slurmdb("associations"), params={"account": account}, ok_codes=(_NOTHING_FOUND,))
        return [
            Association(
                account=parsers.clean(a.get("account")),
                user=parsers.clean(a.get("user")),
                cluster=parsers.clean(a.get("cluster")),
            )
            for a in payload.get("associations") or ()
            if parsers.clean(a.get("account")) == account
        ]

    def add_account(
        self,
        account: str,
        users: Sequence[str] = (),
        *,
        cluster: str = "",
        description: str = "",
        organization: str = "",
    ) -> None:
        raise NotImplementedError("creating accounts needs sacctmgr (CommandTransport)")


class _RestError(Unavailable):
    """An HTTP error or a reply listing errors; submit() sorts it into Rejected/Unavailable."""

    def __init__(self, status: int, errors: list[tuple[int, str]], text: str, payload: Any = None):
        super().__init__(text)
        self.status = status
        self.errors = errors
        self.payload = payload
