"""Where ``nsqfast stat`` gets its numbers: nsqd's ``/stats`` (JSON) from
each nsqd HTTP address given, or from every nsqd an nsqlookupd lists
(``/nodes``), added up per topic and per channel (``Counts``)."""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable
from urllib.parse import urlencode

from msgengine.cli.app import CliError

from nsq.cli import addresses

#: (topic, channel); channel None: the topic itself
Key = tuple[str, "str | None"]


@dataclasses.dataclass
class Counts:
    """One topic's or channel's numbers, summed over the nsqd that have it."""

    depth: int = 0
    disk: int = 0  # backend_depth: the part of depth on disk
    in_flight: int = 0
    deferred: int = 0
    requeued: int = 0
    timed_out: int = 0
    messages: int = 0  # message_count: every message that went through, since nsqd started
    clients: int = 0
    nodes: int = 0

    @property
    def memory(self) -> int:
        return self.depth - self.disk

    def add(self, stats: dict[str, Any]) -> None:
        self.depth += int(stats.get("depth") or 0)
        self.disk += int(stats.get("backend_depth") or 0)
        self.in_flight += int(stats.get("in_flight_count") or 0)
        self.deferred += int(stats.get("deferred_count") or 0)
        self.requeued += int(stats.get("requeue_count") or 0)
        self.timed_out += int(stats.get("timeout_count") or 0)
        self.messages += int(stats.get("message_count") or 0)
        self.clients += int(stats.get("client_count") or len(stats.get("clients") or []))
        self.nodes += 1


class StatsSource:
    """Fetches and adds up the stats of a set of nsqd, found directly or through nsqlookupd."""

    def __init__(self, nsqd_http: Iterable[str], lookupd_http: Iterable[str], timeout: float,
                 topic: str | None = None, channel: str | None = None) -> None:
        self.nsqd_http = list(nsqd_http)
        self.lookupd_http = list(lookupd_http)
        self.timeout = timeout
        self.topic = topic
        self.channel = channel

    def nodes(self) -> list[str]:
        """The nsqd HTTP base URLs to ask this round."""
        urls = list(self.nsqd_http)
        for lookupd in self.lookupd_http:
            payload = addresses.get_json(lookupd, "/nodes", self.timeout, "nsqlookupd")
            data = payload.get("data", payload) if isinstance(payload, dict) else {}
            for producer in data.get("producers") or []:
                if self.topic is not None and self.topic not in (producer.get("topics") or []):
                    continue
                host, port = producer.get("broadcast_address"), producer.get("http_port")
                if host and isinstance(port, int):
                    url = addresses.http_url("%s:%d" % (host, port), "nsqd from nsqlookupd")
                    if url not in urls:
                        urls.append(url)
        return urls

    def fetch(self) -> "Snapshot":
        """One round: the numbers per topic and channel, and the problems met;
        CliError when no server answered at all."""
        problems: list[str] = []
        try:
            nodes = self.nodes()
        except CliError as exc:
            if not self.nsqd_http:
                raise
            problems.append(str(exc))
            nodes = list(self.nsqd_http)
        counts: dict[Key, Counts] = {}
        query = {"format": "json", "include_clients": "false"}
        if self.topic is not None:  # (nsqd filters by topic, and by channel within a topic)
            query["topic"] = self.topic
            if self.channel is not None:
                query["channel"] = self.channel
        params = "?" + urlencode(query)
        answered = 0
        for url in nodes:
            try:
                payload = addresses.get_json(url, "/stats" + params, self.timeout, "nsqd")
            except CliError as exc:
                problems.append(str(exc))
                continue
            answered += 1
            data = payload.get("data", payload) if isinstance(payload, dict) else {}
            for topic in data.get("topics") or []:
                name = topic.get("topic_name")
                if not name or (self.topic is not None and name != self.topic):
                    continue
                counts.setdefault((name, None), Counts()).add(topic)
                for channel in topic.get("channels") or []:
                    channel_name = channel.get("channel_name")
                    if not channel_name or (self.channel is not None and channel_name != self.channel):
                        continue
                    counts.setdefault((name, channel_name), Counts()).add(channel)
        if nodes and not answered:
            raise CliError(problems[0] if len(problems) == 1 else "no nsqd answered: " + "; ".join(problems))
        return Snapshot(counts, problems, answered)


@dataclasses.dataclass
class Snapshot:
    """What one round of ``StatsSource.fetch`` found."""

    counts: dict[Key, Counts]
    problems: list[str]  # one line each: the servers that did not answer, and why
    nodes: int  # how many nsqd answered
