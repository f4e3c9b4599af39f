# pulsarfast.spark.options without a server or pyspark: the `pulsar` data
# source's options as Spark hands them over (strings, case-insensitive keys)
# checked into SourceConfig / ClientOptions: the service and admin URLs,
# exactly one of topic / topics / topicsPattern, startingOffsets and
# endingOffsets (earliest, latest, JSON of [ledgerId, entryId], -2, -1),
# maxMessagesPerTrigger, maxTriggerDelay durations, the pulsar.client.*
# pass-through typed by pulsarfast.Client's defaults, the authentication
# plugin; and that SourceConfig and ClientOptions pickle and hash (the
# executors keep a client per ClientOptions).
from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsarfast import AuthenticationToken
from pulsarfast.base.results import InvalidConfiguration, PulsarException
from pulsarfast.spark.options import (
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    EARLIEST,
    LATEST,
    Bound,
    ClientOptions,
    DataLossError,
    Options,
    PulsarOptionError,
    SourceConfig,
    pass_through,
)
from pulsarfast.spark.positions import Position

pytestmark = pytest.mark.timeout(60)

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SERVICE = "pulsar://127.0.0.1:6650"
ADMIN = "http://127.0.0.1:8080"
BASE = {"service_url": SERVICE, "admin_url": ADMIN, "topic": "t"}


def full(name: str) -> str:
    return "persistent://public/default/" + name


def config(streaming: bool = True, drop: tuple[str, ...] = (), **options) -> SourceConfig:
    given_options = {k: v for k, v in BASE.items() if k not in drop}
    given_options.update({k: str(v) for k, v in options.items()})
    return SourceConfig.from_options(given_options, streaming=streaming)


def client_options(need_admin: bool = True, **options) -> ClientOptions:
    return ClientOptions.from_options(Options({**BASE, **options}), need_admin=need_admin)


def test_option_errors_are_value_errors_and_configuration_errors_and_data_loss_is_neither():
    assert issubclass(PulsarOptionError, ValueError)
    assert issubclass(PulsarOptionError, InvalidConfiguration)
    assert issubclass(DataLossError, PulsarException)
    assert not issubclass(DataLossError, (ValueError, InvalidConfiguration))


def test_the_base_options_give_the_defaults():
    made = config()
    assert made.client == ClientOptions(SERVICE, ADMIN)
    assert made.topics == (full("t"),)
    assert made.pattern is None
    assert made.max_entries_per_trigger is None
    assert made.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS
    assert made.fail_on_data_loss is True


# -- service_url / admin_url -----------------------------------------------------------------------


def test_missing_service_url_is_refused():
    with pytest.raises(PulsarOptionError, match="needs option 'service_url'"):
        config(drop=("service_url",))


def test_blank_service_url_is_refused():
    with pytest.raises(PulsarOptionError, match="needs option 'service_url'"):
        config(service_url="  ")


def test_missing_admin_url_is_refused_for_the_source():
    with pytest.raises(PulsarOptionError, match="needs option 'admin_url'"):
        config(drop=("admin_url",))


def test_admin_url_is_optional_when_not_needed():
    made = ClientOptions.from_options(Options({"service_url": SERVICE}), need_admin=False)
    assert made.admin_url is None and made.service_url == SERVICE


def test_dotted_url_names_are_accepted():
    made = ClientOptions.from_options(Options({"service.url": SERVICE, "admin.url": ADMIN}), need_admin=True)
    assert (made.service_url, made.admin_url) == (SERVICE, ADMIN)


# -- topic / topics / topicsPattern ----------------------------------------------------------------


def test_no_topic_option_is_refused():
    with pytest.raises(PulsarOptionError, match="exactly one of the options 'topic', 'topics' and 'topicsPattern'$"):
        config(drop=("topic",))


@pytest.mark.parametrize("extra, listed", [
    ({"topics": "a,b"}, "topic, topics"),
    ({"topicsPattern": "a.*"}, "topic, topicsPattern"),
    ({"topics": "a", "topicsPattern": "a.*"}, "topic, topics, topicsPattern"),
])
def test_more_than_one_topic_option_is_refused(extra, listed):
    with pytest.raises(PulsarOptionError, match=r"exactly one of the options .*\(given: %s\)" % listed):
        config(**extra)


def test_topic_gives_its_full_name():
    assert config(topic="persistent://tenant/ns/x").topics == ("persistent://tenant/ns/x",)


def test_topics_gives_full_names_once_each_in_order():
    made = config(drop=("topic",), topics="b, a  b,persistent://public/default/c")
    assert made.topics == (full("b"), full("a"), full("c"))
    assert made.pattern is None


def test_topics_pattern_gives_a_full_name_pattern():
    made = config(drop=("topic",), topicsPattern="t-.*")
    assert made.pattern == full("t-.*")
    assert made.topics == ()


@pytest.mark.parametrize("pattern", ["t-[", "t-(", "persistent://public/default/t-)", "**"])
def test_bad_topics_pattern_regex_is_refused(pattern):
    with pytest.raises(PulsarOptionError, match="option 'topicsPattern' is not a regular expression"):
        config(drop=("topic",), topicsPattern=pattern)


def test_bad_topic_name_is_refused_naming_the_option():
    with pytest.raises(PulsarOptionError, match="option 'topic'"):
        config(topic="persistent://only-a-tenant")


# -- startingOffsets / endingOffsets ---------------------------------------------------------------


def test_starting_offsets_default_latest_for_streams_earliest_for_batches():
    assert config().starting == Bound(LATEST)
    assert config(streaming=False).starting == Bound(EARLIEST)
    assert config(streaming=False).ending == Bound(LATEST)


@pytest.mark.parametrize("text, default", [("earliest", EARLIEST), ("latest", LATEST), ("EARLIEST", EARLIEST),
                                           (" Latest ", LATEST)])
def test_starting_offsets_earliest_or_latest(text, default):
    assert config(startingOffsets=text).starting == Bound(default)


def test_starting_offsets_json_of_positions_and_minus_two_and_minus_one():
    made = config(startingOffsets='{"a": [3, 4], "persistent://public/default/b-partition-1": -2, "c": -1}')
    assert made.starting.default == LATEST  # (for partitions the JSON leaves out)
    assert made.starting.specific == {full("a"): Position(3, 4), full("b-partition-1"): EARLIEST,
                                      full("c"): LATEST}
    assert made.starting.for_partition(full("a-partition-0"), full("a")) == Position(3, 4)  # by topic
    assert made.starting.for_partition(full("b-partition-1"), full("b")) == EARLIEST  # by partition
    assert made.starting.for_partition(full("d"), full("d")) == LATEST


@pytest.mark.parametrize("text, problem", [
    ("first", "must be 'earliest', 'latest' or a JSON object"),
    ("{", "must be 'earliest', 'latest' or a JSON object"),
    ("[1, 2]", "the JSON must be an object"),
    ("3", "the JSON must be an object"),
    ('{"a": [1]}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": [1, 2, 3]}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": [1, -1]}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": [-5, 0]}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": [1.0, 2]}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": [true, 2]}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": ["1", "2"]}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": -3}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": "earliest"}', "must be \\[ledgerId, entryId\\]"),
    ('{"a": null}', "must be \\[ledgerId, entryId\\]"),
    ('{"persistent://only-a-tenant": -1}', "option 'startingOffsets'"),
])
def test_bad_starting_offsets_are_refused(text, problem):
    with pytest.raises(PulsarOptionError, match=problem):
        config(startingOffsets=text)


def test_ending_offsets_are_refused_for_streams():
    with pytest.raises(PulsarOptionError, match="'endingOffsets' is for batch queries"):
        config(endingOffsets="latest")


def test_ending_offsets_json_for_batches():
    made = config(streaming=False, endingOffsets='{"a": [7, 0], "b": -1}')
    assert made.ending.default == LATEST
    assert made.ending.specific == {full("a"): Position(7, 0), full("b"): LATEST}


def test_ending_offsets_minus_two_is_refused():
    with pytest.raises(PulsarOptionError, match=r"option 'endingOffsets': the position of 'a' must be "
                                                 r"\[ledgerId, entryId\], -1 \(latest\), not -2"):
        config(streaming=False, endingOffsets='{"a": -2}')


def test_ending_offsets_earliest_is_refused():
    with pytest.raises(PulsarOptionError, match="'endingOffsets' cannot be 'earliest'"):
        config(streaming=False, endingOffsets="earliest")


# -- triggers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "many", "1.5"])
def test_max_messages_per_trigger_below_one_or_not_an_integer_is_refused(value):
    with pytest.raises(PulsarOptionError, match="maxMessagesPerTrigger"):
        config(maxMessagesPerTrigger=value)


def test_max_messages_per_trigger():
    assert config(maxMessagesPerTrigger="1").max_entries_per_trigger == 1
    assert config(maxMessagesPerTrigger="5000").max_entries_per_trigger == 5000


@pytest.mark.parametrize("text, ms", [
    ("30s", 30_000), ("15m", 900_000), ("500", 500), ("500ms", 500), ("1h", 3_600_000), ("1.5s", 1500),
    ("2 min", 120_000), ("10 Seconds", 10_000), ("0", 0),
])
def test_max_trigger_delay_durations(text, ms):
    assert config(maxTriggerDelay=text).max_trigger_delay_ms == ms


@pytest.mark.parametrize("text", ["soon", "-5s", "10d", "s", "1e3", "5 s s", "1,5s"])
def test_bad_max_trigger_delay_is_refused(text):
    with pytest.raises(PulsarOptionError, match="option 'maxTriggerDelay' must be a duration"):
        config(maxTriggerDelay=text)


def test_duration_ms_default_when_missing_or_blank():
    assert Options({}).duration_ms("d", 42) == 42
    assert Options({"d": " "}).duration_ms("d", 42) == 42


@given(st.integers(0, 10**6), st.sampled_from([("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("", 1)]))
@SETTINGS
def test_duration_ms_property(number, unit):
    suffix, factor = unit
    assert Options({"d": "%d%s" % (number, suffix)}).duration_ms("d", -1) == number * factor


# -- pulsar.client.* -------------------------------------------------------------------------------


def test_client_pass_through_is_typed_by_the_clients_defaults():
    made = client_options(**{"pulsar.client.operation_timeout_seconds": "7",
                             "pulsar.client.tls_allow_insecure_connection": "true",
                             "pulsar.client.listener_name": "internal"})
    kwargs = dict(made.client_kwargs)
    assert kwargs == {"operation_timeout_seconds": 7, "tls_allow_insecure_connection": True,
                      "listener_name": "internal"}
    assert type(kwargs["operation_timeout_seconds"]) is int
    assert made.client_kwargs == tuple(sorted(kwargs.items()))


def test_client_pass_through_bad_integer_is_refused():
    with pytest.raises(PulsarOptionError, match="'pulsar.client.operation_timeout_seconds' must be an integer"):
        client_options(**{"pulsar.client.operation_timeout_seconds": "soon"})


def test_client_pass_through_bad_bool_is_refused():
    with pytest.raises(PulsarOptionError, match="'pulsar.client.use_tls' must be true or false"):
        client_options(**{"pulsar.client.use_tls": "maybe"})


def test_client_pass_through_unknown_argument_is_refused_with_the_known_ones():
    with pytest.raises(PulsarOptionError) as info:
        client_options(**{"pulsar.client.operationTimeout": "7"})
    message = str(info.value)
    assert "option 'pulsar.client.operationtimeout'" in message
    assert "Client.__init__ has no argument 'operationtimeout'" in message
    assert "operation_timeout_seconds" in message and "use_tls" in message  # (it takes ...)


def test_pass_through_types_by_each_arguments_default():
    def target(self, topic, count=3, ratio=0.5, on=False, name=None, **more):
        pass

    opts = Options({"p.count": "9", "p.ratio": "2.5", "p.ON": "yes", "p.name": "n", "p.topic": "x", "other": "1"})
    with pytest.raises(PulsarOptionError, match="has no argument 'topic'"):
        pass_through(opts, "p.", target)
    opts = Options({"p.count": "9", "p.ratio": "2.5", "p.ON": "yes", "p.name": "n", "other": "1"})
    assert pass_through(opts, "p.", target) == {"count": 9, "ratio": 2.5, "on": True, "name": "n"}
    with pytest.raises(PulsarOptionError, match="'p.ratio' must be a number"):
        pass_through(Options({"p.ratio": "x"}), "p.", target)


def test_token_authentication_plugin_and_params():
    made = client_options(**{"pulsar.client.authPluginClassName": "token",
                             "pulsar.client.authParams": "token:abc"})
    assert (made.auth_plugin, made.auth_params) == ("token", "token:abc")
    assert made.client_kwargs == ()  # (not Client arguments)
    auth = made.authentication()
    assert isinstance(auth, AuthenticationToken)
    assert auth.auth_data() == b"abc"


def test_jvm_token_plugin_class_name_is_accepted():
    plugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    made = client_options(**{"pulsar.client.authPluginClassName": plugin, "pulsar.client.authParams": "token:abc"})
    assert made.authentication().auth_data() == b"abc"


def test_no_authentication_plugin_gives_none():
    assert client_options().authentication() is None


def test_unknown_authentication_plugin_is_refused():
    with pytest.raises(PulsarOptionError, match="'com.example.MyAuth' is not an authentication pulsarfast has"):
        client_options(**{"pulsar.client.authPluginClassName": "com.example.MyAuth",
                          "pulsar.client.authParams": "x"})


# -- case-insensitive keys -------------------------------------------------------------------------


def test_option_keys_are_case_insensitive():
    made = SourceConfig.from_options({
        "SERVICE_URL": SERVICE, "Admin_Url": ADMIN, "TOPICSPATTERN": "t-.*", "STARTINGOFFSETS": "earliest",
        "maxmessagespertrigger": "10", "MAXTRIGGERDELAY": "30s", "FailOnDataLoss": "false",
        "PULSAR.CLIENT.OPERATION_TIMEOUT_SECONDS": "7", "pulsar.client.AUTHPLUGINCLASSNAME": "token",
        "Pulsar.Client.AuthParams": "token:abc",
    })
    assert made.client.service_url == SERVICE and made.client.admin_url == ADMIN
    assert made.pattern == full("t-.*")
    assert made.starting == Bound(EARLIEST)
    assert made.max_entries_per_trigger == 10
    assert made.max_trigger_delay_ms == 30_000
    assert made.fail_on_data_loss is False
    assert made.client.client_kwargs == (("operation_timeout_seconds", 7),)
    assert isinstance(made.client.authentication(), AuthenticationToken)


def test_upper_case_topic_key_is_the_topic_option():
    made = SourceConfig.from_options({"service_url": SERVICE, "admin_url": ADMIN, "TOPIC": "t"})
    assert made.topics == (full("t"),)


# -- pickling and hashing --------------------------------------------------------------------------

FULL = {"pulsar.client.operation_timeout_seconds": "7", "pulsar.client.authPluginClassName": "token",
        "pulsar.client.authParams": "token:abc"}


def test_client_options_pickle_and_hash():
    made = client_options(**FULL)
    back = pickle.loads(pickle.dumps(made))
    assert back == made
    assert hash(back) == hash(made)
    clients = {made: "client"}  # (the executors keep a client per ClientOptions)
    assert clients[back] == "client"
    assert client_options(**FULL) in clients
    assert client_options() not in clients


def test_source_config_pickles():
    made = config(startingOffsets='{"a": [3, 4], "b": -2}', maxMessagesPerTrigger="10", **FULL)
    back = pickle.loads(pickle.dumps(made))
    assert back == made
    assert back.starting.specific == {full("a"): Position(3, 4), full("b"): EARLIEST}
    assert isinstance(back.client.authentication(), AuthenticationToken)


@pytest.mark.parametrize("starting", ["earliest", '{"a": [3, 4], "b": -2}'])
def test_source_config_hashes(starting):
    made = config(startingOffsets=starting, **FULL)
    again = config(startingOffsets=starting, **FULL)
    assert hash(made) == hash(again)
    assert {made: 1}[again] == 1


def test_a_client_authentication_object_is_refused_with_the_options_to_use():
    with pytest.raises(PulsarOptionError, match="authPluginClassName"):
        config(**{"pulsar.client.authentication": "token:abc"})
