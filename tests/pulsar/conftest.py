"""Fixtures of the Pulsar tests (on top of tests/conftest.py's)."""
from __future__ import annotations

import pytest


@pytest.fixture
def client(make_client, pulsar_broker):
    """A pulsarfast client on the run's shared broker and the test's backend (operation timeout 15 s),
    closed at teardown."""
    return make_client(pulsar_broker)
