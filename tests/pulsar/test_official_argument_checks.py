"""Argument checks as the official client makes them: a wrong type raises the same
ValueError, with the same message, before anything is sent. Each case runs on the
official client and on pulsarfast (no broker: the client points at a closed port,
and a refused argument never gets as far as connecting)."""
from __future__ import annotations

import pytest

import pulsarfast
from tests.support.pulsar_helpers import OFFICIAL_LOGGER, needs_official, official

UNREACHABLE = "pulsar://127.0.0.1:1"

CLIENT_CASES = [
    {"io_threads": "2"},
    {"message_listener_threads": 1.5},
    {"concurrent_lookup_requests": "x"},
    {"stats_interval_in_seconds": "x"},
]
PRODUCER_CASES = [
    {"topic": None},
    {"block_if_queue_full": 1},
    {"batching_enabled": "yes"},
    {"producer_name": 5},
    {"lazy_start_partitioned_producers": 1},
    {"properties": ["a"]},
]
CONSUMER_CASES = [
    {"consumer_name": 5},
    {"broker_consumer_stats_cache_time_ms": "x"},
    {"is_read_compacted": 1},
    {"properties": [1]},
]


def _refusal(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value).__name__, str(info.value)


def _both(make_call):
    """(official's refusal, pulsarfast's refusal) for make_call(lib, client)."""
    outcomes = []
    for lib, extra in ((official, {"logger": OFFICIAL_LOGGER}), (pulsarfast, {})):
        client = lib.Client(UNREACHABLE, operation_timeout_seconds=1, **extra)
        try:
            outcomes.append(_refusal(lambda: make_call(lib, client)))
        finally:
            client.close()
    return outcomes


@needs_official
@pytest.mark.parametrize("kwargs", CLIENT_CASES, ids=lambda kw: next(iter(kw)))
def test_client_arguments_are_type_checked_as_the_official_client_does(kwargs):
    refusals = [_refusal(lambda: lib.Client(UNREACHABLE, **kwargs)) for lib in (official, pulsarfast)]
    assert refusals[0][0] == "ValueError"
    assert refusals[1] == refusals[0]


@needs_official
@pytest.mark.parametrize("kwargs", PRODUCER_CASES, ids=lambda kw: next(iter(kw)))
def test_create_producer_arguments_are_type_checked_as_the_official_client_does(kwargs):
    arguments = {"topic": "t", **kwargs}
    official_refusal, ours = _both(lambda lib, client: client.create_producer(**arguments))
    assert official_refusal[0] == "ValueError"
    assert ours == official_refusal


@needs_official
@pytest.mark.parametrize("kwargs", CONSUMER_CASES, ids=lambda kw: next(iter(kw)))
def test_subscribe_arguments_are_type_checked_as_the_official_client_does(kwargs):
    arguments = {"topic": "t", "subscription_name": "s", **kwargs}
    official_refusal, ours = _both(lambda lib, client: client.subscribe(**arguments))
    assert official_refusal[0] == "ValueError"
    assert ours == official_refusal


@pytest.mark.parametrize("url", ["localhost:6650", "ftp://h:1", "pulsar://", "pulsar://h:notaport", "://x"])
def test_bad_service_urls_raise_the_official_value_error(url):
    needs_official()
    with pytest.raises(ValueError) as theirs:
        official.Client(url, logger=OFFICIAL_LOGGER)
    with pytest.raises(ValueError) as ours:
        pulsarfast.Client(url)
    assert str(ours.value) == str(theirs.value)
    assert isinstance(ours.value, pulsarfast.InvalidUrl)  # (what pulsarfast raised before: both forms catch it)
