"""slurmctld's own OpenMetrics (Slurm 25.11 and later, ``MetricsType=metrics/openmetrics``):
per node, the GPUs it has and the GPUs jobs hold (``slurm_node_gpus``,
``slurm_node_gpus_alloc`` of ``GET /metrics/nodes`` on slurmctld's port).

Where a cluster's config names ``metrics_url`` the inventory takes each node's allocated
GPUs from here: slurmctld's count at one instant, read in one request that needs no munge
key and no token (unless the site sets ``MetricsAuthUsers``), instead of adding up the
GRES each node lists as used.  Where the endpoint does not answer (older Slurm, no
``MetricsType``, slurmctld's RPC port answering something else), ``read`` gives None and
the inventory reads the nodes as before.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import requests

log = logging.getLogger(__name__)

_SAMPLE = re.compile(r'^(slurm_node_gpus(?:_alloc)?)\{node="([^"]+)"\}\s+([0-9]+)\s*$')


@dataclass(frozen=True)
class NodeGpus:
    total: int
    allocated: int


def parse_node_gpus(text: str) -> dict[str, NodeGpus]:
    """Node name -> its GPUs, from an OpenMetrics page; nodes without both samples are left out."""
    totals: dict[str, int] = {}
    allocated: dict[str, int] = {}
    for line in text.splitlines():
        found = _SAMPLE.match(line.strip())
        if found:
            name, node, value = found.groups()
            (allocated if name.endswith("_alloc") else totals)[node] = int(value)
    return {node: NodeGpus(totals[node], allocated[node]) for node in totals if node in allocated}


class NodeMetrics:
    """Reads ``<url>/metrics/nodes``; says once when it stops or starts answering."""

    def __init__(self, url: str, timeout_s: float = 10.0, session: requests.Session | None = None):
        self.url = url.rstrip("/") + "/metrics/nodes"
        self.timeout_s = timeout_s
        self.session = session or requests.Session()
        self._answering: bool | None = None

    def read(self) -> dict[str, NodeGpus] | None:
        try:
            resp = self.session.get(self.url, timeout=self.timeout_s)
            found = parse_node_gpus(resp.text) if resp.status_code == 200 else {}
            why = "" if found else f"HTTP {resp.status_code}, no slurm_node_gpus samples"
        except requests.RequestException as exc:
            found, why = {}, str(exc)
        self._tell(bool(found), why)
        return found or None

    def _tell(self, answering: bool, why: str) -> None:
        if answering != self._answering:
            if answering:
                log.info("slurm metrics %s: node GPU allocation read from slurmctld's OpenMetrics", self.url)
            else:
                log.warning("slurm metrics %s: not answering (%s); reading the nodes' GRES instead", self.url, why)
        self._answering = answering
