# Scraping a prometheus_client registry in the metrics tests (tests/nsq/test_metrics.py,
# tests/pulsar/test_metrics.py): as text from generate_latest, or over HTTP from start_http_server on a
# free loopback port, parsed into {(sample name, labels): value}.
from __future__ import annotations

import urllib.request

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from .waiting import run_blocking


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of an exposition text: (sample name, labels) -> value."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(registry: CollectorRegistry) -> dict[tuple[str, frozenset], float]:
    return parse(generate_latest(registry).decode())


def http_scrape(registry: CollectorRegistry, backend: str) -> dict[tuple[str, frozenset], float]:
    """Serve registry on a free loopback port and scrape it the way Prometheus does (a GET).
    The GET runs where a blocking call does not stall the gevent hub, which the collector's
    reads from the server's thread go through."""
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        url = "http://127.0.0.1:%d/metrics" % server.server_port

        def get() -> tuple[int, str, str]:
            with urllib.request.urlopen(url, timeout=20) as response:
                return response.status, response.headers["Content-Type"], response.read().decode()

        status, content_type, text = run_blocking(backend, get)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert status == 200 and content_type.startswith("text/plain")
    return parse(text)


def value(samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def names(samples) -> set[str]:
    return {name for name, _labels in samples}
