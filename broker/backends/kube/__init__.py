"""Kubernetes backends: Kueue (batch/v1 Job), Volcano (vcjob) and MultiKueue.

All three talk to the API server through the official ``kubernetes`` client
(see ``common.KubeClient``).  The tests' fast layer, an API emulator, lives under
tests/broker/backends/kube/emu; the real control planes come from scripts/k8s-cluster.
"""

from broker.backends.kube.common import KubeClient, KubeConfig

from broker.backends.kube.settings import BackendSettings
from broker.backends.kube.kueue import KueueBackend
from broker.backends.kube.multikueue import MultiKueueBackend
from broker.backends.kube.volcano import VolcanoBackend

__all__ = ["BackendSettings", "KubeClient", "KubeConfig", "KueueBackend", "MultiKueueBackend", "VolcanoBackend"]
