"""The fast unit layer of the Kubernetes backend tests: an HTTP emulator of the API server
with small Kueue and Volcano models, and CRD-schema validation of what the backends send.
The real control planes (tests/broker/backends/kube/real) are the authority; docs/kubernetes.md
lists what they showed this layer had wrong."""
