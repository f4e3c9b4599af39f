"""The ``pulsar`` Spark data source's options, checked on the driver where
Spark hands them over (strings under case-insensitive keys), into frozen,
picklable settings that travel to the executors: ``SourceConfig`` for the
source, ``ClientOptions`` for the client every side builds. Option names are
the ones users of Spark's Kafka source and of the JVM Pulsar connector know
(``startingOffsets``, ``maxMessagesPerTrigger``, ``failOnDataLoss``,
``pulsar.client.*``). Nothing here imports pyspark.
"""
from __future__ import annotations

import enum
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from msgengine.sparkoptions import OptionReader

from pulsarfast.base.results import InvalidConfiguration, PulsarException
from pulsarfast.base.topics import full_topic_name
from pulsarfast.endpoints.auth import Authentication, builtin_plugin
from pulsarfast.spark.admin import AdminSettings
from pulsarfast.spark.positions import Position


class PulsarOptionError(InvalidConfiguration, ValueError):
    """An option of the ``pulsar`` Spark data source is missing or has a bad value."""


class DataLossError(PulsarException):
    """Entries a query was to read are no longer stored (``failOnDataLoss`` is true)."""


class Options(OptionReader):
    """Typed values of the ``pulsar`` data source's options (msgengine.sparkoptions)."""

    error = PulsarOptionError
    source = "pulsar"

    def duration_ms(self, name: str, default: int) -> int:
        """A duration: milliseconds, or a number with a unit (``500ms``, ``30s``, ``15m``, ``1h``)."""
        text = self.get_str(name)
        if text is None:
            return default
        match = _DURATION.fullmatch(text.lower().replace(" ", ""))
        if match is None:
            raise PulsarOptionError("option %r must be a duration (ms, or with a unit: 30s, 15m, 1h), not %r"
                                    % (name, text))
        return int(float(match.group(1)) * _UNITS[match.group(2) or "ms"])


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|sec|seconds?|m|min|minutes?|h|hours?)?")
_UNITS = {"ms": 1, "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000, "m": 60_000, "min": 60_000,
          "minute": 60_000, "minutes": 60_000, "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000}

CLIENT_PREFIX = "pulsar.client."
PRODUCER_PREFIX = "pulsar.producer."
#: the JVM connector's names for the authentication plugin and its parameters (``pulsar.client.`` + these)
AUTH_PLUGIN = "authpluginclassname"
AUTH_PARAMS = "authparams"


def _typed(value: str, default: Any, name: str) -> Any:
    """An option's string as the type of the argument's default."""
    if isinstance(default, bool):
        return Options({name: value}).get_bool(name, default)
    if isinstance(default, enum.Enum):
        members = type(default).__members__
        for key, member in members.items():
            if key.lower() == value.lower():
                return member
        raise PulsarOptionError("option %r must be one of %s, not %r" % (name, ", ".join(members), value))
    if isinstance(default, int):
        return Options({name: value}).get_int(name, default, minimum=-(2**63))
    if isinstance(default, float):
        try:
            return float(value)
        except ValueError:
            raise PulsarOptionError("option %r must be a number, not %r" % (name, value)) from None
    return value


def pass_through(opts: Options, prefix: str, target: Callable[..., Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """``prefix + argument`` options as keyword arguments of target (converted to each argument's
    type); an unknown argument name is refused with the list of known ones."""
    parameters = {name.lower(): (name, p.default) for name, p in inspect.signature(target).parameters.items()
                  if name not in ("self", "topic", "service_url") and p.kind is not p.VAR_KEYWORD}
    kwargs: dict[str, Any] = {}
    for key in opts.names():
        if not key.startswith(prefix):
            continue
        arg = key[len(prefix):]
        if arg in skip:
            continue
        if arg not in parameters:
            raise PulsarOptionError("option %r: %s has no argument %r (it takes %s)" % (
                key, target.__qualname__, arg, ", ".join(sorted(n for n, _ in parameters.values()))))
        name, default = parameters[arg]
        value = opts.get_str(key)
        if value is not None:
            kwargs[name] = _typed(value, default, key)
    return kwargs


@dataclass(frozen=True)
class ClientOptions:
    """How to reach the cluster: the service URL, the admin URL, ``pulsar.client.*`` arguments and
    the authentication plugin's name and parameters (the object is made where it is used)."""

    service_url: str
    admin_url: str | None
    client_kwargs: tuple[tuple[str, Any], ...] = ()  # (hashable: each worker keeps a client per ClientOptions)
    auth_plugin: str | None = None
    auth_params: str = ""

    @classmethod
    def from_options(cls, opts: Options, need_admin: bool) -> "ClientOptions":
        from pulsarfast.client import Client

        service_url = opts.get_str("service_url") or opts.get_str("service.url")
        if service_url is None:
            raise PulsarOptionError("the pulsar data source needs option 'service_url' (pulsar://host:6650)")
        admin_url = opts.get_str("admin_url") or opts.get_str("admin.url")
        if need_admin and admin_url is None:
            raise PulsarOptionError("the pulsar source needs option 'admin_url' (the broker's web service, "
                                    "http://host:8080): it reads partitions and positions there")
        if CLIENT_PREFIX + "authentication" in opts:
            raise PulsarOptionError("option 'pulsar.client.authentication': give the authentication as "
                                    "'pulsar.client.authPluginClassName' and 'pulsar.client.authParams'")
        kwargs = pass_through(opts, CLIENT_PREFIX, Client.__init__, skip=(AUTH_PLUGIN, AUTH_PARAMS))
        kwargs.pop("backend", None)
        made = cls(service_url, admin_url, tuple(sorted(kwargs.items())), opts.get_str(CLIENT_PREFIX + AUTH_PLUGIN),
                   opts.get_str(CLIENT_PREFIX + AUTH_PARAMS, "") or "")
        made.authentication()  # (checked here: an unknown plugin fails on the driver)
        return made

    def authentication(self) -> Authentication | None:
        if not self.auth_plugin:
            return None
        made = builtin_plugin(self.auth_plugin, self.auth_params)
        if made is None:
            raise PulsarOptionError("option 'pulsar.client.authPluginClassName': %r is not an authentication "
                                    "pulsarfast has (token, tls, basic, oauth2)" % self.auth_plugin)
        return made

    def admin_settings(self) -> AdminSettings:
        assert self.admin_url is not None
        kwargs = dict(self.client_kwargs)
        return AdminSettings(
            url=self.admin_url,
            timeout=float(kwargs.get("operation_timeout_seconds", 30)),
            trust_certs_file=kwargs.get("tls_trust_certs_file_path"),
            allow_insecure=bool(kwargs.get("tls_allow_insecure_connection", False)),
            validate_hostname=bool(kwargs.get("tls_validate_hostname", False)),
        )


# -- the sink's delivery guarantee ---------------------------------------------------------------

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
DELIVERY_GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
#: the exactly-once log's local name, in the output topic's namespace unless exactlyOnceLogTopic says
EO_LOG_NAME = "__pulsarfast_spark_eo_log"


@dataclass(frozen=True)
class DeliverySettings:
    """The sink's ``deliveryGuarantee`` (``at-least-once``, the default, or ``exactly-once``: each
    task's rows in a transaction its driver commits), the transactions' timeout
    (``transactionTimeoutMs``) and the topic of the exactly-once log (``exactlyOnceLogTopic``)."""

    exactly_once: bool = False
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    log_topic: str | None = None

    @classmethod
    def from_options(cls, opts: Options, topic: str | None) -> "DeliverySettings":
        """From the options; topic is the sink's ``topic`` option (full name) or None."""
        given = opts.get_str("deliveryGuarantee")
        guarantee = (given or AT_LEAST_ONCE).lower().replace("_", "-")
        if guarantee not in DELIVERY_GUARANTEES:
            raise PulsarOptionError("option 'deliveryGuarantee' must be 'at-least-once' (the default) or "
                                    "'exactly-once' (each task's messages in a Pulsar transaction that the "
                                    "driver commits), not %r" % given)
        timeout = opts.duration_ms("transactionTimeoutMs", DEFAULT_TRANSACTION_TIMEOUT_MS)
        if timeout <= 0:
            raise PulsarOptionError("option 'transactionTimeoutMs' must be above 0, not %r"
                                    % opts.get_str("transactionTimeoutMs"))
        log_topic = opts.get_str("exactlyOnceLogTopic")
        try:
            if log_topic is not None:
                log_topic = full_topic_name(log_topic)
            elif topic is not None:
                log_topic = "persistent://%s/%s" % (topic.partition("://")[2].rsplit("/", 1)[0], EO_LOG_NAME)
        except PulsarException as exc:
            raise PulsarOptionError("option 'exactlyOnceLogTopic': %s" % exc) from None
        return cls(guarantee == EXACTLY_ONCE, timeout, log_topic)


# -- where to start and end --------------------------------------------------------------------

EARLIEST = "earliest"
LATEST = "latest"
#: in a JSON of offsets, as in Spark's Kafka source: -2 the earliest, -1 the latest
JSON_EARLIEST = -2
JSON_LATEST = -1


@dataclass(frozen=True)
class Bound:
    """startingOffsets or endingOffsets: ``earliest``, ``latest``, or per partition (a JSON object
    of partition or topic names to ``[ledgerId, entryId]`` of the first entry to read, or -2 /
    -1); ``default`` for partitions the JSON leaves out."""

    default: str
    pairs: tuple[tuple[str, Position | str], ...] = ()  # (a tuple: the settings are hashable)

    @property
    def specific(self) -> dict[str, Position | str]:
        """The positions the JSON gave, by full topic or partition name."""
        return dict(self.pairs)

    @classmethod
    def parse(cls, opts: Options, name: str, default: str, allow_earliest: bool = True) -> "Bound":
        text = opts.get_str(name)
        if text is None:
            return cls(default)
        lowered = text.lower()
        if lowered in (EARLIEST, LATEST):
            if lowered == EARLIEST and not allow_earliest:
                raise PulsarOptionError("option %r cannot be 'earliest'" % name)
            return cls(lowered)
        try:
            value = json.loads(text)
        except ValueError:
            raise PulsarOptionError("option %r must be 'earliest', 'latest' or a JSON object of partitions to "
                                    "[ledgerId, entryId], not %r" % (name, text)) from None
        if not isinstance(value, dict):
            raise PulsarOptionError("option %r: the JSON must be an object, not %r" % (name, text))
        specific: dict[str, Position | str] = {}
        for topic, where in value.items():
            try:
                key = full_topic_name(str(topic))
            except PulsarException as exc:
                raise PulsarOptionError("option %r: %s" % (name, exc)) from None
            if where == JSON_EARLIEST and allow_earliest:
                specific[key] = EARLIEST
            elif where == JSON_LATEST:
                specific[key] = LATEST
            elif (isinstance(where, list) and len(where) == 2 and all(type(x) is int for x in where)
                  and where[0] >= 0 and where[1] >= 0):
                specific[key] = Position(where[0], where[1])
            else:
                raise PulsarOptionError("option %r: the position of %r must be [ledgerId, entryId], %s-1 (latest), "
                                        "not %r" % (name, topic, "-2 (earliest), " if allow_earliest else "", where))
        return cls(default, tuple(specific.items()))

    def for_partition(self, partition: str, topic: str) -> Position | str:
        specific = self.specific
        return specific.get(partition, specific.get(topic, self.default))


DEFAULT_RECEIVER_QUEUE = 2000
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
DEFAULT_ROWS_PER_ARROW_BATCH = 10_000


@dataclass(frozen=True)
class SourceConfig:
    """The source's settings, checked on the driver (and pickled to the executors)."""

    client: ClientOptions
    topics: tuple[str, ...]  # full names (topic / topics)
    pattern: str | None  # topicsPattern: a regular expression of full names
    starting: Bound
    ending: Bound
    starting_timestamp: int | None
    max_entries_per_trigger: int | None
    min_entries_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int
    fail_on_data_loss: bool
    subscription: str | None
    poll_timeout_ms: int
    receiver_queue_size: int
    rows_per_batch: int
    #: valueSchema=topic: decode values by the topic's registered schema (fetched on the driver)
    decode_values: bool = False
    #: that schema (a values.ValueSchema), once fetched
    value_schema: Any = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], streaming: bool = True) -> "SourceConfig":
        opts = Options(options)
        client = ClientOptions.from_options(opts, need_admin=True)
        given = [name for name in ("topic", "topics", "topicsPattern") if name in opts]
        if len(given) != 1:
            raise PulsarOptionError("the pulsar source needs exactly one of the options 'topic', 'topics' and "
                                    "'topicsPattern'%s" % ("" if not given else " (given: %s)" % ", ".join(given)))
        topics: tuple[str, ...] = ()
        pattern = None
        try:
            if given[0] == "topicsPattern":
                pattern = full_topic_name(opts.required("topicsPattern", "a regular expression of topic names"))
                re.compile(pattern)
            else:
                names = opts.get_list(given[0])
                topics = tuple(dict.fromkeys(full_topic_name(name) for name in names))
        except PulsarException as exc:
            raise PulsarOptionError("option %r: %s" % (given[0], exc)) from None
        except re.error as exc:
            raise PulsarOptionError("option 'topicsPattern' is not a regular expression: %s" % exc) from None
        timestamp = opts.get_int("startingTimestamp", -1, minimum=0) if "startingTimestamp" in opts else None
        max_entries = opts.get_int("maxMessagesPerTrigger", 0, minimum=1) if "maxMessagesPerTrigger" in opts else None
        min_entries = opts.get_int("minMessagesPerTrigger", 0, minimum=1) if "minMessagesPerTrigger" in opts else None
        value_schema = (opts.get_str("valueSchema") or "none").lower()
        if value_schema not in ("none", "topic"):
            raise PulsarOptionError("option 'valueSchema' must be 'none' or 'topic' (decode values by the topic's "
                                    "registered AVRO or JSON schema), not %r" % opts.get_str("valueSchema"))
        if value_schema == "topic" and len(topics) != 1:
            raise PulsarOptionError("option 'valueSchema=topic' needs one topic (option 'topic'): its schema "
                                    "makes the columns")
        if "endingOffsets" in opts and streaming:
            raise PulsarOptionError("option 'endingOffsets' is for batch queries (spark.read), not streams")
        return cls(
            client=client,
            topics=topics,
            pattern=pattern,
            starting=Bound.parse(opts, "startingOffsets", LATEST if streaming else EARLIEST),
            ending=Bound.parse(opts, "endingOffsets", LATEST, allow_earliest=False),
            starting_timestamp=timestamp,
            max_entries_per_trigger=max_entries,
            min_entries_per_trigger=min_entries,
            max_trigger_delay_ms=opts.duration_ms("maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
            min_partitions=opts.get_int("minPartitions", 0, minimum=0),
            fail_on_data_loss=opts.get_bool("failOnDataLoss", True),
            subscription=opts.get_str("subscriptionName"),
            poll_timeout_ms=opts.get_int("pollTimeoutMs", DEFAULT_POLL_TIMEOUT_MS, minimum=1),
            receiver_queue_size=opts.get_int("receiverQueueSize", DEFAULT_RECEIVER_QUEUE, minimum=1),
            rows_per_batch=opts.get_int("rowsPerArrowBatch", DEFAULT_ROWS_PER_ARROW_BATCH, minimum=1),
            decode_values=value_schema == "topic",
        )
