"""Fleet telemetry: the Prometheus scrape at /metrics and the sampled history behind the charts."""
