"""The demo: seed data, the simulated fleet's outage switch and `manage.py demo`."""
