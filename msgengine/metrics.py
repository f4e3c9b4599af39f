"""The Prometheus machinery that ``nsq.metrics`` and ``pulsarfast.metrics``
share: importing ``prometheus_client`` (a clear ImportError when it is
missing), a table of metric specs, families that sum the samples of equal
labels, and ``ObjectCollector``, a custom collector that holds the client
objects it reports weakly and reads their ``stats()`` at scrape time, so
that no message ever touches a metric.

Only those two modules import this one: ``import nsq``, ``import
pulsarfast`` and ``import msgengine`` never import prometheus_client.
"""
from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Iterator, Literal, TypeVar, cast

try:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry
except ImportError as exc:  # (the optional dependency: say which extra brings it)
    raise ImportError(
        "the metrics collectors need prometheus_client: pip install nsqfast[metrics]"
    ) from exc

__all__ = [
    "MetricSpec", "Families", "ObjectCollector", "shared_collector", "registered_collector",
    "register_object", "unregister_object", "REGISTRY", "CollectorRegistry",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
C = TypeVar("C", bound="ObjectCollector[Any]")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its full name (a counter's ends in ``_total``), kind, help and label names."""

    name: str
    kind: Literal["counter", "gauge"]
    documentation: str
    labels: tuple[str, ...]

    def family(self) -> "CounterMetricFamily | GaugeMetricFamily":
        if self.kind == "counter":
            return CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        return GaugeMetricFamily(self.name, self.documentation, labels=self.labels)


class Families:
    """The samples of one scrape, by metric name; samples with the same label
    values (two Readers of one topic/channel) are summed."""

    def __init__(self, specs: Iterable[MetricSpec]) -> None:
        self._specs = tuple(specs)
        self._values: dict[str, dict[tuple[str, ...], float]] = {spec.name: {} for spec in self._specs}

    def add(self, name: str, labels: tuple[str, ...], value: float) -> None:
        values = self._values[name]
        values[labels] = values.get(labels, 0) + value

    def metrics(self) -> Iterator[Metric]:
        for spec in self._specs:
            family = spec.family()
            for labels, value in self._values[spec.name].items():
                family.add_metric(list(labels), value)
            yield family


class ObjectCollector(Collector, Generic[T]):
    """A collector over client objects held weakly: an object that is
    garbage-collected, or closed when a scrape comes, is dropped (its
    series disappear). Subclasses say which objects they take, how to tell
    a closed one, and how to read one into the families."""

    #: every metric the subclass reports
    specs: tuple[MetricSpec, ...] = ()

    def __init__(self, objects: Iterable[T] = ()) -> None:
        self._lock = threading.Lock()
        self._objects: weakref.WeakSet[Any] = weakref.WeakSet()
        for obj in objects:
            self.add(obj)

    # -- what subclasses define -------------------------------------------------------

    def accepts(self, obj: object) -> bool:
        raise NotImplementedError

    def is_closed(self, obj: T) -> bool:
        raise NotImplementedError

    def read(self, obj: T, families: Families) -> None:
        raise NotImplementedError

    # -- the objects -------------------------------------------------------------------

    def add(self, obj: T) -> None:
        """Report obj from the next scrape on (held weakly; dropped once closed)."""
        if not self.accepts(obj):
            raise TypeError("%s cannot report a %s" % (type(self).__name__, type(obj).__name__))
        with self._lock:
            self._objects.add(obj)

    def remove(self, obj: T) -> None:
        """Stop reporting obj (nothing happens when it is not reported)."""
        with self._lock:
            self._objects.discard(obj)

    def objects(self) -> list[T]:
        """The objects reported now."""
        with self._lock:
            return list(self._objects)

    # -- prometheus_client's side -------------------------------------------------------

    def describe(self) -> Iterator[Metric]:
        """The metric names, without samples: the registry refuses a second
        collector of the same names (use ``register``, which shares one)."""
        return Families(self.specs).metrics()

    def collect(self) -> Iterator[Metric]:
        families = Families(self.specs)
        for obj in self.objects():
            try:
                if self.is_closed(obj):
                    self.remove(obj)
                    continue
                self.read(obj, families)
            except Exception:  # one object must not cost the whole scrape
                logger.exception("cannot read the stats of %r", obj)
        return families.metrics()


#: the collectors shared_collector made, by registry and by the class (the factory) it made them of
_Made = dict[Callable[[], "ObjectCollector[Any]"], "ObjectCollector[Any]"]
_shared: "weakref.WeakKeyDictionary[CollectorRegistry, _Made]" = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


def shared_collector(cls: Callable[[], C], registry: CollectorRegistry) -> C:
    """The one collector of class cls in registry: made and registered on first use."""
    with _shared_lock:
        by_class = _shared.setdefault(registry, {})
        collector = by_class.get(cls)
        if collector is None:
            collector = cls()
            registry.register(collector)
            by_class[cls] = collector
        return cast(C, collector)


def registered_collector(
    cls: Callable[[], "ObjectCollector[Any]"], registry: CollectorRegistry
) -> "ObjectCollector[Any] | None":
    """The collector shared_collector made for cls in registry, if any."""
    with _shared_lock:
        return _shared.get(registry, {}).get(cls)


def register_object(cls: Callable[[], C], obj: Any, registry: CollectorRegistry) -> C:
    """What a client's ``metrics.register`` does: report obj in registry through
    the one collector of class cls there (made and registered on first use);
    returns that collector. TypeError when cls does not report such objects."""
    collector = shared_collector(cls, registry)
    collector.add(obj)
    return collector


def unregister_object(cls: Callable[[], "ObjectCollector[Any]"], obj: Any, registry: CollectorRegistry) -> None:
    """What a client's ``metrics.unregister`` does: stop reporting obj through
    the collector of class cls in registry (nothing happens when there is none,
    or obj is not reported)."""
    collector = registered_collector(cls, registry)
    if collector is not None:
        collector.remove(obj)
