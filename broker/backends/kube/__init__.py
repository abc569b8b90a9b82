"""Kubernetes backends: Kueue (batch/v1 Job), Volcano (vcjob) and MultiKueue.

All three talk to the API server through the official ``kubernetes`` client
(see ``common.KubeClient``); ``emulator.KubeEmulator`` stands in for a cluster
in tests and demos.
"""
from broker.backends.kube.common import BackendSettings, KubeClient, KubeConfig
from broker.backends.kube.kueue import KueueBackend
from broker.backends.kube.multikueue import MultiKueueBackend
from broker.backends.kube.volcano import VolcanoBackend

__all__ = ["BackendSettings", "KubeClient", "KubeConfig", "KueueBackend",
           "MultiKueueBackend", "VolcanoBackend"]
