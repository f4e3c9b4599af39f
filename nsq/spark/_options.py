"""Spark hands data source options over as strings (keys case-insensitive):
this module turns them into checked Python values, with error messages that
name the option (the source's ``SourceConfig`` among them), and finds the
nsqd to talk to (given, or asked of nsqlookupd). Nothing here imports pyspark.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import requests

from msgengine.sparkoptions import OptionReader

from nsq import lookupd
from nsq.client import split_host_port
from nsq.config import Config, ReaderSettings
from nsq.errors import ConfigError
from nsq.names import valid_channel_name, valid_topic_name


class NsqOptionError(ConfigError):
    """An option of the `nsq` Spark data source is missing or has a bad value."""


class Options(OptionReader):
    """Typed values of the `nsq` data source's options (msgengine.sparkoptions)."""

    error = NsqOptionError
    source = "nsq"


def check_topic_option(topic: str, name: str = "topic") -> str:
    if not valid_topic_name(topic):
        raise NsqOptionError("option %r: %r is not a valid nsq topic name" % (name, topic))
    return topic


def check_channel_option(channel: str, name: str = "channel") -> str:
    if not valid_channel_name(channel):
        raise NsqOptionError("option %r: %r is not a valid nsq channel name" % (name, channel))
    return channel


def nsqd_addresses(values: list[str], name: str = "nsqd_tcp_addresses") -> list[tuple[str, int]]:
    result = []
    for value in values:
        try:
            result.append(split_host_port(value))
        except ConfigError:
            raise NsqOptionError("option %r: %r is not host:port" % (name, value)) from None
    return result


def connection_kwargs(opts: Options) -> dict[str, Any]:
    """Settings for nsq.Connection shared by the source and the sink."""
    kwargs: dict[str, Any] = {
        "backend": "threads",
        "timeout": opts.get_int("connect_timeout_ms", 5000, minimum=1) / 1000.0,
        "user_agent": opts.get_str("user_agent", "nsqfast-spark"),
    }
    heartbeat_ms = opts.get_int("heartbeat_interval_ms", 30000, minimum=1000)
    kwargs["heartbeat_interval"] = heartbeat_ms / 1000.0
    if opts.get_bool("snappy", False):
        kwargs["snappy"] = True
    if opts.get_bool("deflate", False):
        kwargs["deflate"] = True
    if opts.get_bool("tls_v1", False):
        kwargs["tls_v1"] = True
    secret = opts.get_str("auth_secret")
    if secret is not None:
        kwargs["auth_secret"] = secret
    try:
        Config.from_kwargs(kwargs)  # validated here, where the options are read
    except ConfigError as exc:
        raise NsqOptionError(str(exc)) from exc
    return kwargs


def _get_json(url: str, timeout: float) -> Any:
    response = requests.get(url, headers={"Accept": lookupd.ACCEPT}, timeout=timeout)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()


def _base_url(address: str) -> str:
    if "://" not in address:
        address = "http://" + address
    return address.rstrip("/")


def lookupd_nodes(address: str, timeout: float) -> list[tuple[str, int]]:
    """Every nsqd an nsqlookupd knows (its /nodes answer)."""
    payload = _get_json(_base_url(address) + "/nodes", timeout) or {}
    data = payload.get("data", payload) if isinstance(payload, dict) else {}
    return lookupd.parse_producers(data)


def discover(
    lookupd_addresses: list[str], topic: str | None, timeout: float, *, fall_back_to_nodes: bool
) -> list[tuple[str, int]]:
    """nsqd (host, port) pairs from nsqlookupd: the topic's producers, or with
    ``fall_back_to_nodes`` every known nsqd when no producer has the topic yet
    (a publisher may create it anywhere). Raises when no nsqlookupd answered."""
    found: set[tuple[str, int]] = set()
    answered = 0
    errors = []
    for address in lookupd_addresses:
        try:
            if topic is not None:
                found.update(lookupd.query(address, topic, timeout, timeout))
            answered += 1
        except (requests.RequestException, ValueError) as exc:
            errors.append("%s: %s" % (address, exc))
    if not found and fall_back_to_nodes:
        for address in lookupd_addresses:
            try:
                found.update(lookupd_nodes(address, timeout))
                answered += 1
            except (requests.RequestException, ValueError) as exc:
                errors.append("%s: %s" % (address, exc))
    if not answered:
        raise ConnectionError("no nsqlookupd answered: %s" % "; ".join(errors))
    return sorted(found)


DEFAULT_MAX_IN_FLIGHT = 200000
DEFAULT_MAX_BATCH_WAIT_MS = 500


@dataclass(frozen=True)
class SourceConfig:
    topic: str
    channel: str
    nsqd: tuple[tuple[str, int], ...]
    lookupd: tuple[str, ...]
    lookupd_timeout: float
    lookupd_poll_interval: float
    max_in_flight: int
    max_messages_per_batch: int | None  # None: a batch takes what has arrived (max_in_flight bounds it)
    max_bytes_per_batch: int | None
    batch_wait: float  # seconds latestOffset may wait for a batch to fill while messages keep arriving
    num_partitions: int
    msg_timeout: float | None
    touch_interval: float | None
    available_now_idle: float
    max_reconnect_delay: float
    conn_kwargs: Mapping[str, Any]  # pickled to executors: the Config is built where it is used

    @property
    def connection(self) -> Config:
        return Config.from_kwargs(self.conn_kwargs)

    @property
    def reader_settings(self) -> ReaderSettings:
        """The subscription's settings, with the source's choices: max_in_flight
        is each nsqd's budget (the option's documented meaning), as many
        connections to each nsqd as it takes under nsqd's max_rdy_count, nsqd
        found through nsqlookupd kept connected, polls without jitter."""
        return ReaderSettings(
            max_in_flight=self.max_in_flight,
            max_reconnect_delay=self.max_reconnect_delay,
            lookupd_poll_interval=self.lookupd_poll_interval,
            lookupd_poll_jitter=0.0,
            lookupd_connect_timeout=self.lookupd_timeout,
            lookupd_request_timeout=self.lookupd_timeout,
            connections_per_nsqd=0,
            keep_discovered=True,
            max_in_flight_per_nsqd=True,
        )

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "SourceConfig":
        opts = Options(options)
        topic = check_topic_option(opts.required("topic", "the nsq topic to read"))
        channel = check_channel_option(opts.required("channel", "the nsq channel to consume as"))
        nsqd = nsqd_addresses(opts.get_list("nsqd_tcp_addresses"))
        lookupd = opts.get_list("lookupd_http_addresses")
        if not nsqd and not lookupd:
            raise NsqOptionError("the nsq source needs option 'nsqd_tcp_addresses' or 'lookupd_http_addresses'")
        max_in_flight = opts.get_int("max_in_flight", DEFAULT_MAX_IN_FLIGHT, minimum=1)
        max_bytes = opts.get_int("max_bytes_per_batch", 0, minimum=0)
        msg_timeout_ms = opts.get_int("msg_timeout_ms", 0, minimum=0)
        touch_ms = opts.get_int("touch_interval_ms", 0, minimum=0)
        conn_kwargs = connection_kwargs(opts)
        if msg_timeout_ms:
            conn_kwargs["msg_timeout"] = msg_timeout_ms / 1000.0
        return cls(
            topic=topic,
            channel=channel,
            nsqd=tuple(nsqd),
            lookupd=tuple(lookupd),
            lookupd_timeout=opts.get_int("lookupd_timeout_ms", 5000, minimum=1) / 1000.0,
            lookupd_poll_interval=opts.get_int("lookupd_poll_interval_ms", 30000, minimum=100) / 1000.0,
            max_in_flight=max_in_flight,
            max_messages_per_batch=opts.get_int("max_messages_per_batch", 0, minimum=0) or None,
            max_bytes_per_batch=max_bytes or None,
            batch_wait=opts.get_int("max_batch_wait_ms", DEFAULT_MAX_BATCH_WAIT_MS, minimum=0) / 1000.0,
            num_partitions=opts.get_int("num_partitions", 2, minimum=1),
            msg_timeout=msg_timeout_ms / 1000.0 if msg_timeout_ms else None,
            touch_interval=touch_ms / 1000.0 if touch_ms else None,
            available_now_idle=opts.get_int("available_now_idle_ms", 2000, minimum=0) / 1000.0,
            max_reconnect_delay=opts.get_int("max_reconnect_delay_ms", 30000, minimum=100) / 1000.0,
            conn_kwargs=conn_kwargs,
        )
