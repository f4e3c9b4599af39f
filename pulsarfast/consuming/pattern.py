"""Pattern subscriptions: ``subscribe(re.compile("persistent://public/default/prefix-.*"), ...)``,
as the official client's (a str is a topic name there, never a pattern).

``TopicPattern`` is the pattern given: the namespace its text names as a topic name would
(``persistent://public/default/prefix-.*``: public/default; no tenant and namespace:
public/default), the domains ``RegexSubscriptionMode`` takes (PersistentOnly, NonPersistentOnly,
AllTopics; the domain the pattern's text names is ignored, as by the official clients), and the
listed topics it takes: those whose name without its domain matches the whole pattern without its
domain (``re.fullmatch``, the pattern's flags kept); a partition is taken when its own name or its
topic's matches. The broker is not asked to filter (its Java regexes are not Python's): every topic
of the namespace is listed, the client filters.

``PatternWatch`` lists the namespace (CommandGetTopicsOfNamespace, asked of a service host over the
binary protocol) at subscribe, then every ``pattern_auto_discovery_period`` seconds (at least 1)
on a task of its own: topics listed since that match are joined (subscribed as subscribe() does,
the consumer's flow budget spread again over its topics), topics no longer listed are left (their
TopicConsumers closed, no longer re-subscribed). A listing that fails is logged and tried again at
the next period. It holds its consumer and client weakly and stops when the consumer closes.

Where the broker takes it (its CONNECTED's ``supports_topic_watchers``) and the mode takes persistent
topics, the watch also opens a topic-list watch (WATCH_TOPIC_LIST) on the same connection, as the
official clients do: the broker tells of topics created and deleted in the namespace as they come
and go (WATCH_TOPIC_UPDATE), and those the pattern takes are joined or left at once, without
waiting for the period. The watch asks for every persistent topic of the namespace (the pattern
is still matched here, with Python's ``re``); the listing every period goes on beside it (it also
catches non-persistent topics, and anything missed while the watch's connection was down: a watch
whose connection closed is opened again at the next period).
"""
from __future__ import annotations

import itertools
import logging
import re
import weakref
from typing import Any, Callable, Protocol, Sequence

from pulsarfast.base.enums import RegexSubscriptionMode
from pulsarfast.base.results import InvalidConfiguration, PulsarException
from pulsarfast.base.topics import PARTITION_SUFFIX, full_topic_name, partition_index
from pulsarfast.consuming.consumer import Consumer, TopicConsumer
from pulsarfast.network.lookup import Lookup
from pulsarfast.wire import proto

logger = logging.getLogger(__name__)

_DOMAINS = {
    RegexSubscriptionMode.PersistentOnly: ("persistent",),
    RegexSubscriptionMode.NonPersistentOnly: ("non-persistent",),
    RegexSubscriptionMode.AllTopics: ("persistent", "non-persistent"),
}
#: the shortest time between two listings, in seconds
MIN_PERIOD = 1.0


class TopicPattern:
    """A pattern subscription's pattern; see the module docstring."""

    def __init__(self, pattern: re.Pattern, mode: RegexSubscriptionMode) -> None:
        _domain, _, rest = full_topic_name(pattern.pattern).partition("://")
        self.text: str = pattern.pattern
        self.namespace = rest.rpartition("/")[0]
        self.mode = RegexSubscriptionMode(mode)
        self._domains = _DOMAINS[self.mode]
        try:
            self._regex = re.compile(rest, pattern.flags)
        except re.error as exc:  # pragma: no cover - the text compiled before, with the domain
            raise InvalidConfiguration("pattern %r: %s" % (self.text, exc)) from None

    def takes(self, topic: str) -> bool:
        """Whether a listed topic (a full name) is one of the pattern's."""
        domain, sep, rest = topic.partition("://")
        if not sep or domain not in self._domains:
            return False
        if self._regex.fullmatch(rest) is not None:
            return True
        return partition_index(rest) >= 0 and self._regex.fullmatch(rest.rpartition(PARTITION_SUFFIX)[0]) is not None

    def matching(self, listed: Sequence[str]) -> list[str]:
        """The listed topics the pattern takes, in their order, each once (a partition is left out
        when its partitioned topic is listed and taken: the topic stands for its partitions)."""
        taken = [topic for topic in dict.fromkeys(listed) if self.takes(topic)]
        whole = set(taken)
        return [topic for topic in taken
                if partition_index(topic) < 0 or topic.rpartition(PARTITION_SUFFIX)[0] not in whole]


def list_namespace(lookups: Any, namespace: str, mode: RegexSubscriptionMode, timeout: float) -> list[str]:
    """The topics of namespace the broker lists in mode (the partitions of partitioned topics).
    Over the binary protocol only: an HTTP service URL raises InvalidConfiguration."""
    if not isinstance(lookups, Lookup):
        raise InvalidConfiguration("pattern subscriptions list their namespace over the binary protocol: "
                                   "they need a pulsar:// or pulsar+ssl:// service URL")
    conn = lookups.service_connection()
    answer = conn.request(lambda rid: proto.get_topics_of_namespace(namespace, rid, int(mode)), timeout)
    return list(answer.topics)


_WATCHER_IDS = itertools.count(1)


def open_topic_watch(lookups: Any, namespace: str, sink: Any, timeout: float) -> tuple[Any, int] | None:
    """A topic-list watch of namespace's persistent topics, reporting to sink: (connection, watcher
    id), or None when the broker does not take watches (or the service URL is HTTP's)."""
    if not isinstance(lookups, Lookup):
        return None
    conn = lookups.service_connection()
    if not conn.supports_topic_watchers:
        return None
    watcher_id = next(_WATCHER_IDS)
    conn.register_watcher(watcher_id, sink)
    everything = "persistent://%s/.*" % namespace  # (the pattern itself is matched here, with Python's re)
    try:
        conn.request(lambda rid: proto.watch_topic_list(rid, watcher_id, namespace, everything), timeout)
    except PulsarException:
        conn.unregister_watcher(watcher_id, sink)
        raise
    return conn, watcher_id


def close_topic_watch(conn: Any, watcher_id: int, sink: Any) -> None:
    """Stop a watch (its answer is not waited for)."""
    conn.unregister_watcher(watcher_id, sink)
    try:
        conn.send_command(proto.watch_topic_list_close(conn.protocol.new_request_id(), watcher_id))
    except PulsarException:
        pass  # (a closed connection took the watch with it)


class PatternClient(Protocol):
    """What a PatternWatch uses of its Client."""

    backend: Any

    def topics_of_namespace(self, namespace: str, mode: RegexSubscriptionMode) -> list[str]: ...

    def add_topics(self, consumer: Consumer, parts: Sequence[tuple[str, int]]) -> None: ...

    def get_topic_partitions(self, topic: str) -> list[str]: ...

    def forget_consumer(self, consumer: Any) -> None: ...

    def watch_namespace(self, namespace: str, sink: Any) -> tuple[Any, int] | None: ...


class PatternWatch:
    """Keeps a pattern consumer's topics those the namespace lists; see the module docstring."""

    def __init__(self, client: PatternClient, consumer: Consumer, pattern: TopicPattern, period: float) -> None:
        self._client = client  # (the client's weak proxy)
        self._consumer: Callable[[], Consumer | None] = weakref.ref(consumer)
        self.pattern = pattern
        self.period = max(MIN_PERIOD, float(period))
        self.backend = client.backend
        self._lock = self.backend.lock()
        self._timer: Any = None
        self._closed = False
        #: listings done (the first at subscribe)
        self.listings = 0
        #: each listed topic joined -> the names of its TopicConsumers (its partitions, or itself)
        self._joined: dict[str, list[str]] = {}
        #: held while the topics joined change (a listing, or a watch's update)
        self._changing = self.backend.lock()
        #: the topic-list watch: (connection, watcher id), None when there is none (yet)
        self._watch: tuple[Any, int] | None = None
        #: updates the watch reported
        self.watch_updates = 0

    def __repr__(self) -> str:
        return "<PatternWatch %s>" % self.pattern.text

    def first_topics(self) -> list[tuple[str, int]]:
        """The matching topics now, as (name, partition index), a partitioned topic's partitions
        for it: subscribe() subscribes them."""
        found = []
        for listed in self._listed():
            parts = self._expand(listed)
            self._joined[listed] = [name for name, _index in parts]
            found.extend(parts)
        return found

    def _expand(self, listed: str) -> list[tuple[str, int]]:
        """A listed topic's TopicConsumers to be: its partitions (a partitioned topic), or itself."""
        if partition_index(listed) >= 0:
            return [(listed, partition_index(listed))]
        names = self._client.get_topic_partitions(listed)
        if names == [listed]:
            return [(listed, -1)]
        return [(name, partition_index(name)) for name in names]

    def _listed(self) -> list[str]:
        listed = self._client.topics_of_namespace(self.pattern.namespace, self.pattern.mode)
        self.listings += 1
        return self.pattern.matching(listed)

    def start(self) -> None:
        """The consumer subscribed: list again every period, and watch where the broker can."""
        self._arm()
        if self.pattern.mode is not RegexSubscriptionMode.NonPersistentOnly:
            self.backend.spawn(self._open_watch)

    def _open_watch(self) -> None:
        try:
            watch = self._client.watch_namespace(self.pattern.namespace, self)
        except ReferenceError:
            return
        except PulsarException as exc:
            logger.info("[%s] no topic-list watch of %s (%s): listing every %.0fs", self.pattern.text,
                        self.pattern.namespace, exc, self.period)
            return
        if watch is None:
            return
        with self._lock:
            if not self._closed:
                self._watch, watch = watch, None
        if watch is not None:  # (closed meanwhile)
            close_topic_watch(watch[0], watch[1], self)

    @property
    def watching(self) -> bool:
        """A topic-list watch is open (the broker reports topics as they come and go)."""
        return self._watch is not None

    # the watch's sink (called on its connection's reading task: the work goes in a task)

    def on_topics_changed(self, new_topics: list[str], deleted_topics: list[str]) -> None:
        self.watch_updates += 1
        self.backend.spawn(self._apply_update, new_topics, deleted_topics)

    def on_closed(self, reason: BaseException) -> None:
        with self._lock:
            self._watch = None  # (opened again at the next period)

    def _apply_update(self, new_topics: list[str], deleted_topics: list[str]) -> None:
        try:
            consumer = self._consumer()
            if consumer is None or consumer.closed or self._closed:
                return
            with self._changing:
                for name in self.pattern.matching(new_topics):
                    if name not in self._joined:
                        self._join(consumer, name)
                gone = [name for name in deleted_topics if name in self._joined]
                if gone:
                    leaving = {topic for name in gone for topic in self._joined.pop(name)}
                    self._leave(consumer, [each for each in consumer.topic_consumers() if each.topic in leaving])
        except ReferenceError:
            return
        except Exception:
            logger.exception("[%s] applying a topic-list update", self.pattern.text)

    def _arm(self) -> None:
        with self._lock:
            if not self._closed:
                self._timer = self.backend.call_later(self.period, self._tick)

    def _tick(self) -> None:
        self.backend.spawn(self._discover_and_arm)

    def _discover_and_arm(self) -> None:
        try:
            consumer = self._consumer()
            if consumer is None or consumer.closed or self._closed:
                return
            self.discover(consumer)
            if self._watch is None and self.pattern.mode is not RegexSubscriptionMode.NonPersistentOnly:
                self._open_watch()
        except ReferenceError:  # (the client was dropped)
            return
        except PulsarException as exc:
            logger.warning("[%s] listing the topics of %s: %s; again in %.0fs",
                           self.pattern.text, self.pattern.namespace, exc, self.period)
        except Exception:
            logger.exception("[%s] pattern discovery failed; again in %.0fs", self.pattern.text, self.period)
        self._arm()

    def discover(self, consumer: Consumer) -> None:
        """List the namespace once: join the topics new to the consumer, leave the ones not listed."""
        with self._changing:
            self._discover(consumer)

    def _discover(self, consumer: Consumer) -> None:
        listed = self._listed()
        wanted = set(listed)
        new = [name for name in listed if name not in self._joined]
        gone = [name for name in self._joined if name not in wanted]
        for name in new:
            self._join(consumer, name)
        if gone:
            leaving = {topic for name in gone for topic in self._joined.pop(name)}
            self._leave(consumer, [each for each in consumer.topic_consumers() if each.topic in leaving])

    def _join(self, consumer: Consumer, listed: str) -> None:
        """Subscribe a topic listed since (all its partitions, or none: tried again at the next listing)."""
        try:
            parts = self._expand(listed)
        except PulsarException as exc:
            logger.warning("[%s] joining %s: %s; again at the next listing", self.pattern.text, listed, exc)
            return
        try:
            self._client.add_topics(consumer, parts)
        except PulsarException as exc:
            logger.warning("[%s] joining %s: %s; again at the next listing", self.pattern.text, listed, exc)
            return
        self._joined[listed] = [name for name, _index in parts]
        if not consumer.closed:
            logger.info("[%s] joined %s", self.pattern.text, listed)

    def _leave(self, consumer: Consumer, gone: list[TopicConsumer]) -> None:
        for each in gone:
            consumer.remove_topic(each)
            self._close(each)
            logger.info("[%s] left %s (no longer listed)", self.pattern.text, each.topic)
        consumer.spread_budget()

    def _close(self, each: TopicConsumer) -> None:
        self._client.forget_consumer(each)
        try:
            each.close()
        except PulsarException as exc:
            logger.info("[%s] closing %s: %s", self.pattern.text, each.topic, exc)

    def close(self) -> None:
        """Stop listing (the consumer closed)."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
            watch, self._watch = self._watch, None
        if watch is not None:
            close_topic_watch(watch[0], watch[1], self)
        if timer is not None:
            try:
                timer.cancel()
            except Exception:  # pragma: no cover - in a forked child, a timer of the parent's scheduler thread
                pass
