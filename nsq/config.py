"""Settings, validated once: the frozen ``Config`` that a connection, the
Reader, the Writer and the Spark source and sink share; and the Reader's and
the Writer's own settings (``ReaderSettings``, ``WriterSettings``), where their
defaults are written (the Reader's and Writer's signatures read them there;
the flow-control defaults come from ``msgengine.flow``).

It is built from pynsq's keyword arguments with pynsq's names and defaults
(``Config.from_kwargs``); an unknown connection keyword is refused with
pynsq's error (``InvalidKeywordArgumentError``, an AssertionError too), and
every other bad value with ``ConfigError``. Settings the engine checks (the
backend name, TLS options, the snappy library) are checked here too, and the
engine's refusal is translated into ``ConfigError``. Nothing is connected and
no Connection is built to validate.
"""
from __future__ import annotations

import dataclasses
import socket
from typing import Any, Mapping

from msgengine.errors import EngineConfigError
from msgengine.flow import DEFAULT_LOW_RDY_IDLE_TIMEOUT, DEFAULT_MAX_BACKOFF_DURATION
from msgengine.runtime import BackendSetting
from msgengine.transport import import_snappy, make_ssl_context

from nsq import codec
from nsq.errors import ConfigError
from nsq.version import __version__

DEFAULT_USER_AGENT = "nsqfast/%s" % __version__


class InvalidKeywordArgumentError(ConfigError, AssertionError):
    """Unknown keyword argument; an AssertionError too, as pynsq raises."""


def _number(name: str, value: Any, *, minimum: float | None = None, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError("%s must be a number, not %r" % (name, value))
    if positive and not value > 0:
        raise ConfigError("%s must be a positive number, not %r" % (name, value))
    if minimum is not None and value < minimum:
        raise ConfigError("%s must be at least %s, not %r" % (name, minimum, value))


def _int(name: str, value: Any, low: int, high: int | None = None, what: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bounds = "from %d to %d" % (low, high) if high is not None else ">= %d" % low
        raise ConfigError("%s must be an int %s%s, not %r" % (name, bounds, what, value))


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a connection to nsqd needs, under pynsq's names and defaults
    (see ``nsq.conn.Connection`` for what each one does)."""

    timeout: float | None = 1.0
    heartbeat_interval: float | None = 30
    requeue_delay: float = 90
    tls_v1: bool = False
    tls_options: Mapping[str, Any] | Any = None
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = 6
    user_agent: str = DEFAULT_USER_AGENT
    output_buffer_size: int = 16 * 1024
    output_buffer_timeout: int = 250
    sample_rate: int = 0
    io_loop: Any = None
    auth_secret: bytes | str | None = dataclasses.field(default=None, repr=False)
    msg_timeout: float | None = None
    hostname: str | None = None
    client_id: str | None = None
    topology_zone: str | None = None
    topology_region: str | None = None
    max_requeue_delay: float = 900
    max_frame_size: int = codec.DEFAULT_MAX_FRAME_SIZE
    #: bytes per socket read; None: the backend's (``Backend.read_size``: 256 KiB, 64 KiB on asyncio's)
    read_size: int | None = None
    #: "auto", "gevent", "threads" or a Backend; read back, always the Backend
    backend: BackendSetting = BackendSetting(ConfigError)
    #: made from tls_options when tls_v1 is on (not a keyword)
    ssl_context: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.snappy and self.deflate:
            raise ConfigError("snappy and deflate cannot both be enabled on one connection")
        _int("deflate_level", self.deflate_level, 1, 9)
        _int("sample_rate", self.sample_rate, 0, 99)
        heartbeat = self.heartbeat_interval
        if heartbeat is not None and heartbeat != -1 and not (
            not isinstance(heartbeat, bool) and isinstance(heartbeat, (int, float)) and heartbeat >= 1
        ):
            raise ConfigError("heartbeat_interval must be at least 1 second (or -1 to disable), not %r" % (heartbeat,))
        msg_timeout = self.msg_timeout
        if msg_timeout is not None and (
            isinstance(msg_timeout, bool) or not isinstance(msg_timeout, (int, float)) or msg_timeout <= 0
        ):
            raise ConfigError("msg_timeout must be a positive number of seconds, not %r" % (msg_timeout,))
        for name in ("requeue_delay", "max_requeue_delay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError("%s must be a non-negative number of seconds, not %r" % (name, value))
        if self.timeout is not None:  # None: connect and handshake without a time limit
            _number("timeout", self.timeout, positive=True)
        _int("max_frame_size", self.max_frame_size, 8)
        if self.read_size is not None:
            _int("read_size", self.read_size, 1)
        try:
            ssl_context = make_ssl_context(self.tls_options) if self.tls_v1 else None
            if self.snappy:
                import_snappy()  # a missing python-snappy fails here, not mid-handshake
        except EngineConfigError as exc:
            raise ConfigError(str(exc)) from exc
        object.__setattr__(self, "ssl_context", ssl_context)
        if self.hostname is None:
            object.__setattr__(self, "hostname", socket.gethostname())
        if self.client_id is None:
            object.__setattr__(self, "client_id", str(self.hostname).split(".")[0])

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> "Config":
        """A Config from a Reader's or Writer's ``**conn_kwargs`` (or a
        Config passed whole as ``config=``)."""
        if "config" in kwargs:
            config = kwargs["config"]
            if not isinstance(config, Config) or len(kwargs) > 1:
                raise ConfigError("config= takes an nsq.config.Config, and no other connection keyword beside it")
            return config
        unknown = sorted(set(kwargs) - KEYWORDS)
        if unknown:
            raise InvalidKeywordArgumentError("Invalid keyword argument(s): %s" % unknown)
        return cls(**kwargs)

    def replace(self, **changes: Any) -> "Config":
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def backend_requested(self) -> str:
        """The ``backend=`` given: "auto" (the default), a name, or the name of the Backend given."""
        setting: BackendSetting = vars(type(self))["backend"]
        return setting.requested(self)

    # -- what the settings mean on the wire ----------------------------------

    @property
    def read_timeout(self) -> float | None:
        """Two heartbeat intervals: nothing heard for that long means nsqd is gone."""
        if self.heartbeat_interval in (None, -1):
            return None
        return 2.0 * self.heartbeat_interval

    def identify_data(self) -> dict[str, Any]:
        """The IDENTIFY body: every field, as nsqd reads them."""
        heartbeat = self.heartbeat_interval
        data: dict[str, Any] = {
            "client_id": self.client_id,
            "hostname": self.hostname,
            "feature_negotiation": True,
            "heartbeat_interval": -1 if heartbeat in (None, -1) else int(heartbeat * 1000),
            "output_buffer_size": self.output_buffer_size,
            "output_buffer_timeout": self.output_buffer_timeout,
            "tls_v1": bool(self.tls_v1),
            "snappy": bool(self.snappy),
            "deflate": bool(self.deflate),
            "deflate_level": self.deflate_level,
            "sample_rate": self.sample_rate,
            "user_agent": self.user_agent,
        }
        if self.msg_timeout is not None:
            data["msg_timeout"] = int(self.msg_timeout * 1000)
        if self.topology_zone is not None:
            data["topology_zone"] = self.topology_zone
        if self.topology_region is not None:
            data["topology_region"] = self.topology_region
        return data


#: The connection keywords Reader, Writer and Connection accept.
KEYWORDS = frozenset(f.name for f in dataclasses.fields(Config) if f.init)
#: pynsq's AsyncConn takes its settings by position too, in this order.
POSITIONAL = tuple(f.name for f in dataclasses.fields(Config) if f.init)


# -- the Reader's and Writer's own settings ----------------------------------


@dataclasses.dataclass(frozen=True)
class ReaderSettings:
    """The Reader's own settings beside its connections', under pynsq's names,
    defaults and limits (the Reader's signature reads its defaults here), and
    the choices its ``nsq.subscription.Subscription`` makes where the Spark
    source differs from pynsq. The Reader builds one from its keywords, the
    Spark source from its options; the Subscription takes it whole."""

    max_tries: int = 5
    max_in_flight: int = 1
    lookupd_poll_interval: float = 60
    low_rdy_idle_timeout: float = DEFAULT_LOW_RDY_IDLE_TIMEOUT
    max_backoff_duration: float = DEFAULT_MAX_BACKOFF_DURATION
    lookupd_poll_jitter: float = 0.3
    lookupd_connect_timeout: float = 1
    lookupd_request_timeout: float = 2
    concurrency: int = 1
    close_timeout: float = 30.0
    max_reconnect_delay: float = 60.0
    # The subscription's choices (not Reader keywords): pynsq's behaviour by default.
    #: connections to each nsqd: 1 as in pynsq; 0 as many as it takes for
    #: max_in_flight to fit under nsqd's max_rdy_count (the Spark source's)
    connections_per_nsqd: int = 1
    #: keep nsqd found through nsqlookupd connected between polls (pynsq
    #: connects to them once per poll)
    keep_discovered: bool = False
    #: max_in_flight is each nsqd's budget (the Spark source's meaning) rather
    #: than the whole subscription's
    max_in_flight_per_nsqd: bool = False

    def __post_init__(self) -> None:
        _int("max_in_flight", self.max_in_flight, 1)
        _int("max_tries", self.max_tries, 0, what=" (0 disables it)")
        _int("concurrency", self.concurrency, 1)
        jitter = self.lookupd_poll_jitter
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0 <= jitter <= 1:
            raise ConfigError("lookupd_poll_jitter must be between 0 and 1")
        for name in (
            "lookupd_poll_interval", "low_rdy_idle_timeout", "max_backoff_duration", "close_timeout",
            "max_reconnect_delay",
        ):
            _number(name, getattr(self, name), positive=True)
        _int("connections_per_nsqd", self.connections_per_nsqd, 0, what=" (0: as many as max_in_flight needs)")


#: nsqd's --max-msg-size default
DEFAULT_MAX_MSG_SIZE = 1024 * 1024
#: nsqd's --max-body-size default
DEFAULT_MAX_BODY_SIZE = 5 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class WriterSettings:
    """The Writer's own settings beside its connections' (the Writer's
    signature reads its defaults here); built once by the Writer."""

    reconnect_interval: float = 15.0
    publish_timeout: float = 10.0
    retry_publish: bool = False
    max_msg_size: int = DEFAULT_MAX_MSG_SIZE
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    join_publishes: bool = True

    def __post_init__(self) -> None:
        interval = self.reconnect_interval
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise ConfigError("reconnect_interval must be a positive number of seconds")
        _number("publish_timeout", self.publish_timeout, positive=True)
        _int("max_msg_size", self.max_msg_size, 1)
        _int("max_body_size", self.max_body_size, 1)
