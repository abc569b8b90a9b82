"""HTTP to /api/v1/ with the token; every failure becomes an ApiError or a ConnectError."""

from __future__ import annotations

import uuid
from typing import Any

import requests

from gpubroker_cli.config import Config

TIMEOUT_S = 30


class ConnectError(Exception):
    """The server cannot be reached, or refuses the token (exit code 3)."""


class Unreachable(ConnectError):
    """No answer at all (refused, timed out, DNS): safe to retry with the same idempotency key."""


class ApiError(Exception):
    """The API answered with its error shape (exit code 1)."""

    def __init__(self, status: int, code: str, message: str, fields: dict[str, list[str]]):
        super().__init__(message)
        self.status, self.code, self.message, self.fields = status, code, message, fields

    def lines(self) -> list[str]:
        out = [f"error: {self.message} ({self.code}, HTTP {self.status})"]
        for name, problems in sorted(self.fields.items()):
            for problem in problems if isinstance(problems, list) else [problems]:
                out.append(f"  {name}: {problem}")
        return out


class Client:
    def __init__(self, config: Config, session: requests.Session | None = None):
        self.base = config.url + "/api/v1/"
        self.session = session or requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {config.token}", "Accept": "application/json"})

    def get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, params={k: v for k, v in params.items() if v not in (None, "")})

    def get_text(self, path: str, **params: Any) -> str:
        return self._call("GET", path, params=params, raw=True, headers={"Accept": "text/csv, */*"})

    def post(self, path: str, body: dict | None = None, *, idempotent: bool = False) -> Any:
        headers = {"Idempotency-Key": str(uuid.uuid4())} if idempotent else {}
        try:
            return self._call("POST", path, json=body or {}, headers=headers)
        except Unreachable:
            if not idempotent:
                raise
            # the same key again: the server answers with the first workload, never a second
            return self._call("POST", path, json=body or {}, headers=headers)

    def list_all(self, path: str, **params: Any) -> list[dict]:
        page = self.get(path, **params)
        items = list(page.get("results", []))
        while page.get("next"):
            page = self._call("GET", page["next"], absolute=True)
            items.extend(page.get("results", []))
        return items

    def _call(self, method: str, path: str, *, raw: bool = False, absolute: bool = False, **kwargs: Any) -> Any:
        url = path if absolute else self.base + path.lstrip("/")
        try:
            response = self.session.request(method, url, timeout=TIMEOUT_S, **kwargs)
        except requests.RequestException as exc:
            raise Unreachable(f"cannot connect to {self.base}: {exc.__class__.__name__}: {exc}") from None
        if response.status_code == 401:
            raise ConnectError(
                f"the server refused the token ({_error(response).message}); log in again with a valid token"
            )
        if response.status_code >= 400:
            raise _error(response)
        if raw:
            return response.text
        return response.json() if response.content else {}


def _error(response: requests.Response) -> ApiError:
    try:
        body = response.json()["error"]
        return ApiError(
            response.status_code, str(body.get("code", "error")), str(body.get("message", "")), body.get("fields") or {}
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        text = response.text.strip().splitlines()[0][:200] if response.text.strip() else response.reason
        return ApiError(response.status_code, "http_error", text, {})
