"""Where a user's webhook may point: a public http(s) address only.

A webhook URL is typed by any member and then fetched by the broker's worker, inside the
network it runs in; without a check it is a way to make the broker POST to internal services
(server-side request forgery).  The URL is checked when it is saved, and again when each
delivery connects: the name is resolved once, every address it resolves to must be public,
and the connection goes to that vetted address, so a name that later resolves elsewhere
(DNS rebinding) cannot slip past.  TLS still checks the certificate against the URL's name.

Loopback is allowed only when ``GPUBROKER_WEBHOOK_ALLOW_LOOPBACK`` is set (the tests and a
demo with a receiver on the same machine); private, link-local and other non-public ranges
never are.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from portal.tenancy.errors import DomainError

FIELD = "webhook_url"
SCHEMES = ("http", "https")


class UnsafeWebhookUrl(DomainError, ValueError):
    """The URL may not be used; the message says why, for the ``webhook_url`` field."""

    field = FIELD


def _refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why this address is not a webhook's, or "" when it may be one."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "" if settings.GPUBROKER_WEBHOOK_ALLOW_LOOPBACK else "a loopback address"
    for kind, bad in (
        ("an unspecified address", ip.is_unspecified),
        ("a link-local address", ip.is_link_local),
        ("a private address", ip.is_private),
        ("a multicast address", ip.is_multicast),
    ):
        if bad:
            return kind
    return "" if ip.is_global else "a reserved (non-public) address"


def _check_addresses(host: str, addresses: list[str]) -> None:
    for address in addresses:
        why = _refusal(ipaddress.ip_address(address.split("%", 1)[0]))
        if why:
            shown = f"{host} is" if host == address else f"{host} resolves to {address}, which is"
            raise UnsafeWebhookUrl(f"{shown} {why}; webhooks are sent only to public addresses.")


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def webhook_url_check(url: str) -> None:
    """At save: the scheme, a host, and the addresses it resolves to now.  A name that does
    not resolve yet is accepted: nothing is sent to it until it resolves to a public one."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise UnsafeWebhookUrl("must be an http:// or https:// URL.")
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        raise UnsafeWebhookUrl("has a port that is not a number from 1 to 65535.") from None
    if not host:
        raise UnsafeWebhookUrl("names no host.")
    if _literal(host):
        _check_addresses(host, [host])
        return
    try:
        addresses = _resolve(host, port)
    except (socket.gaierror, UnicodeError):
        return
    _check_addresses(host, addresses)


def vetted_address(host: str, port: int) -> str:
    """At delivery: the one address to connect to, every address of the name being public."""
    addresses = [host] if _literal(host) else _resolve(host, port)
    _check_addresses(host, addresses)
    return addresses[0]


class _VettedConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        name = self._dns_host
        self._dns_host = vetted_address(name.rstrip("."), self.port)
        try:
            return super()._new_conn()
        finally:
            self._dns_host = name  # the Host header and TLS name stay the URL's


class _VettedTLSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        name = self._dns_host
        self._dns_host = vetted_address(name.rstrip("."), self.port)
        try:
            return super()._new_conn()
        finally:
            self._dns_host = name


class _VettedPool(HTTPConnectionPool):
    ConnectionCls = _VettedConnection


class _VettedTLSPool(HTTPSConnectionPool):
    ConnectionCls = _VettedTLSConnection


class _VettedAdapter(HTTPAdapter):
    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: object) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _VettedPool, "https": _VettedTLSPool}


def webhook_session() -> requests.Session:
    """A session that connects only to vetted addresses and never through a proxy from the
    environment (a proxy would resolve the name itself, out of reach of the check)."""
    session = requests.Session()
    session.trust_env = False
    adapter = _VettedAdapter(max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
