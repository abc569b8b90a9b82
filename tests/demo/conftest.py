"""The demo's tests use the broker's fixtures (a fleet, tenants, users)."""

from tests.broker.conftest import *  # noqa: F403 (fixtures are found by name)
