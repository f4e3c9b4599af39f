# The official names pulsarfast added for `import pulsarfast as pulsar` (and `import pulsarfast._pulsar as
# _pulsar`): the same call on the official client and on pulsarfast gives the same result or exception.
# Server-less, except Message.encryption_context() (a message received from the real broker).
from __future__ import annotations

import logging

import pytest

import pulsarfast
import pulsarfast._pulsar as fast_pulsar
from pulsarfast.base.logger import reset_logs
from tests.support.pulsar_helpers import OFFICIAL_LOGGER, full, official_client, produce

official = pytest.importorskip(
    "pulsar", reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)"
)
import _pulsar as official_pulsar  # noqa: E402 - the official C extension (after the official wheel's skip)

pytestmark = pytest.mark.timeout(150)

NOWHERE = "pulsar://127.0.0.1:1"  # (neither client connects before it is used)
ENUMS = ["BatchingType", "CompressionType", "ConsumerType", "InitialPosition", "KeySharedMode",
         "PartitionsRoutingMode", "ProducerAccessMode", "ConsumerCryptoFailureAction", "RegexSubscriptionMode",
         "SchemaType", "LoggerLevel", "Result"]


def outcome(call):
    """(the exception's type name and message) or ("ok", the result's repr)."""
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - what is raised is what is compared
        return type(exc).__name__, str(exc)
    return "ok", repr(result)


def both(make):
    """outcome(make(module)) for the official module and for pulsarfast: the pair that must be equal."""
    return outcome(lambda: make(official)), outcome(lambda: make(pulsarfast))


@pytest.fixture(autouse=True)
def default_logs():
    """Each test ends with pulsarfast's logs and the official library's logger as they were."""
    yield
    reset_logs()


def restore_official_logger():
    """The official C++ library keeps the last client's logger for the process: give it back the tests' one."""
    official.Client(NOWHERE, logger=OFFICIAL_LOGGER).close()


# ----------------------------------------------------------------------------- _pulsar


@pytest.mark.parametrize("name", ENUMS)
def test_pulsar_module_enums(name):
    theirs, ours = getattr(official_pulsar, name), getattr(fast_pulsar, name)
    assert {key: int(value) for key, value in ours.__members__.items()} == \
        {key: int(value) for key, value in theirs.__members__.items()}
    assert [str(member) for member in ours.__members__.values()] == \
        [str(member) for member in theirs.__members__.values()]
    if getattr(official, name, None) is theirs:
        assert getattr(pulsarfast, name) is ours


def test_pulsar_module_has_what_the_official_top_level_shares_with_it():
    shared = [name for name in dir(official_pulsar)
              if not name.startswith("_") and getattr(official, name, None) is getattr(official_pulsar, name)]
    not_here: set[str] = set()
    missing = [name for name in shared if name not in not_here and not hasattr(fast_pulsar, name)]
    assert missing == []
    for name in shared:
        if name in not_here:
            continue
        assert getattr(fast_pulsar, name) is getattr(pulsarfast, name), name
        if isinstance(getattr(official_pulsar, name), type) and issubclass(getattr(official_pulsar, name), Exception):
            assert issubclass(getattr(fast_pulsar, name), fast_pulsar.PulsarException), name


def test_pulsar_module_message_id_and_service_info():
    theirs = official_pulsar.MessageId(1, 2, 3, 4)
    ours = fast_pulsar.MessageId(1, 2, 3, 4)
    assert ours.serialize() == theirs.serialize()
    assert str(ours) == str(theirs)
    assert fast_pulsar.MessageId is pulsarfast.MessageId
    assert fast_pulsar.ServiceInfo is pulsarfast.ServiceInfo
    info = official_pulsar.ServiceInfo("pulsar+ssl://h:6651", None, "/ca.pem")
    fast_info = fast_pulsar.ServiceInfo("pulsar+ssl://h:6651", None, "/ca.pem")
    assert (fast_info.service_url, fast_info.use_tls, fast_info.tls_trust_certs_file_path) == \
        (info.service_url, info.use_tls, info.tls_trust_certs_file_path)


def test_interrupted_at_top_level():
    assert pulsarfast.Interrupted is fast_pulsar.Interrupted
    assert issubclass(pulsarfast.Interrupted, pulsarfast.PulsarException)
    assert issubclass(official.Interrupted, official.PulsarException)
    assert int(pulsarfast.Result.Interrupted) == int(official.Result.Interrupted)
    assert "Interrupted" in pulsarfast.__all__


# ----------------------------------------------------------------------------- loggers


@pytest.mark.parametrize("make", [
    lambda pulsar: vars(pulsar.ConsoleLogger()),
    lambda pulsar: vars(pulsar.ConsoleLogger(pulsar.LoggerLevel.Debug)),
    lambda pulsar: vars(pulsar.ConsoleLogger(log_level=pulsar.LoggerLevel.Error)),
    lambda pulsar: pulsar.ConsoleLogger(1),
    lambda pulsar: pulsar.ConsoleLogger("Info"),
    lambda pulsar: vars(pulsar.FileLogger(pulsar.LoggerLevel.Warn, "/tmp/pulsar.log")),
    lambda pulsar: pulsar.FileLogger(pulsar.LoggerLevel.Info, 5),
    lambda pulsar: pulsar.FileLogger(2, "/tmp/pulsar.log"),
    lambda pulsar: pulsar.FileLogger(pulsar.LoggerLevel.Info),
    lambda pulsar: pulsar.ConsoleLogger().log_level is pulsar.LoggerLevel.Info,
], ids=["console-default", "console-debug", "console-keyword", "console-int", "console-str", "file",
        "file-path-int", "file-level-int", "file-no-path", "console-level-is-member"])
def test_logger_constructors(make):
    theirs, ours = both(make)
    if ours[0] == "TypeError":  # (a missing argument: the same error; the message names the class's __init__)
        assert theirs[0] == "TypeError"
    else:
        assert ours == theirs


@pytest.mark.parametrize("make", [
    lambda pulsar: pulsar.Client(NOWHERE, logger="x"),
    lambda pulsar: pulsar.Client(NOWHERE, logger=5),
    lambda pulsar: pulsar.Client(NOWHERE, logger=pulsar.LoggerLevel.Info),
    lambda pulsar: pulsar.Client(NOWHERE, logger=logging.LoggerAdapter(OFFICIAL_LOGGER, {})),
    lambda pulsar: pulsar.Client(NOWHERE, logger="x", connection_timeout_ms="a"),
    lambda pulsar: pulsar.Client(5, logger="x"),
    lambda pulsar: pulsar.Client(None),
], ids=["str", "int", "level", "adapter", "timeout-checked-first", "url-checked-first", "url-none"])
def test_client_refuses_what_is_not_a_logger(make):
    theirs, ours = both(make)
    assert ours == theirs
    assert ours[0] == "ValueError"


@pytest.mark.parametrize("make_logger", [
    lambda pulsar, path: OFFICIAL_LOGGER,
    lambda pulsar, path: pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    lambda pulsar, path: pulsar.FileLogger(pulsar.LoggerLevel.Error, str(path)),
], ids=["logging.Logger", "ConsoleLogger", "FileLogger"])
def test_client_takes_each_logger(make_logger, tmp_path):
    for pulsar in (official, pulsarfast):
        kwargs = {"backend": "threads"} if pulsar is pulsarfast else {}
        client = pulsar.Client(NOWHERE, logger=make_logger(pulsar, tmp_path / "log.txt"), **kwargs)
        client.close()
    restore_official_logger()


def test_python_logger_gets_the_records():
    target = logging.getLogger("test-official-names.target")
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    target.addHandler(handler)
    target.setLevel(logging.INFO)
    target.propagate = False
    try:
        client = pulsarfast.Client(NOWHERE, logger=target, backend="threads")
        logging.getLogger("pulsarfast.client").info("routed %d", 1)
        logging.getLogger("pulsarfast.consuming.consumer").debug("below the target's level")
        client.close()
        assert [(record.name, record.getMessage()) for record in seen] == [("pulsarfast.client", "routed 1")]
        assert logging.getLogger("pulsarfast").propagate is False
        reset_logs()
        assert logging.getLogger("pulsarfast").propagate is True
        logging.getLogger("pulsarfast.client").warning("not routed any more")
        assert len(seen) == 1
    finally:
        target.removeHandler(handler)


def test_file_logger_writes_from_its_level(tmp_path):
    path = tmp_path / "pulsarfast.log"
    pulsarfast.Client(NOWHERE, logger=pulsarfast.FileLogger(pulsarfast.LoggerLevel.Warn, str(path)),
                      backend="threads").close()
    logging.getLogger("pulsarfast.producing.producer").info("not written")
    logging.getLogger("pulsarfast.producing.producer").warning("written")
    reset_logs()
    text = path.read_text()
    assert "written" in text and "not written" not in text


def test_console_logger_writes_on_stdout(capsys):
    pulsarfast.Client(NOWHERE, logger=pulsarfast.ConsoleLogger(), backend="threads").close()
    logging.getLogger("pulsarfast.client").info("on stdout")
    logging.getLogger("pulsarfast.client").debug("below Info")
    reset_logs()
    out, err = capsys.readouterr()
    assert "on stdout" in out and "below Info" not in out and "on stdout" not in err


def test_no_logger_changes_nothing():
    tree = logging.getLogger("pulsarfast")
    before = (list(tree.handlers), tree.propagate, tree.level)
    pulsarfast.Client(NOWHERE, backend="threads").close()
    assert (list(tree.handlers), tree.propagate, tree.level) == before


# ----------------------------------------------------------------------------- MessageId.wrap


def test_message_id_wrap():
    for pulsar in (official, pulsarfast):
        original = pulsar.MessageId(2, 10, 20, 3)
        wrapped = pulsar.MessageId.wrap(pulsar.MessageId.deserialize(original.serialize()))
        assert type(wrapped) is pulsar.MessageId
        assert wrapped == original and wrapped is not original
        assert (str(wrapped), wrapped.ledger_id(), wrapped.entry_id(), wrapped.partition(), wrapped.batch_index()) == \
            ("(10,20,2,3)", 10, 20, 2, 3)
        assert wrapped.serialize() == original.serialize()
    theirs, ours = both(lambda pulsar: pulsar.MessageId.wrap())
    assert ours[0] == theirs[0] == "TypeError"
    # (the official wrap takes anything and fails later; pulsarfast says at once)
    with pytest.raises(ValueError, match="msg_id"):
        pulsarfast.MessageId.wrap(5)


# ----------------------------------------------------------------------------- ServiceInfo


@pytest.mark.parametrize("args", [
    ("pulsar://localhost:6650",),
    ("pulsar+ssl://h:6651", None, "/x.pem"),
    ("pulsar+ssl://h1:6651,h2:6651/",),
    ("http://h:8080",),
    ("https://h:8443",),
    ("pulsar://h",),
    ("bogus",),
    ("",),
    ("foo://h:1",),
    ("PULSAR://h:1",),
    ("pulsar://",),
    ("://h:1",),
    ("pulsar:/h:1",),
    (5,),
    ("pulsar://h:1", 5),
    ("pulsar://h:1", None, 5),
    ("pulsar://h:1", "token"),
])
def test_service_info(args):
    theirs, ours = both(lambda pulsar: pulsar.ServiceInfo(*args))
    assert ours == theirs


def test_service_info_with_authentication():
    theirs, ours = both(lambda pulsar: pulsar.ServiceInfo("pulsar://h:1", pulsar.AuthenticationToken("t")))
    assert ours == theirs
    theirs, ours = both(lambda pulsar: pulsar.ServiceInfo(service_url="pulsar://h:1", tls_trust_certs_file_path="/a"))
    assert ours == theirs


def test_service_info_provider_base_class():
    for pulsar in (official, pulsarfast):
        provider = pulsar.ServiceInfoProvider()
        with pytest.raises(NotImplementedError):
            provider.initial_service_info()
        with pytest.raises(NotImplementedError):
            provider.initialize(lambda info: None)
        assert provider.close() is None


def test_client_takes_a_service_info_provider():
    """As the official client: it starts on initial_service_info(), calls initialize(), and close() closes
    the provider (tests/pulsar/test_official_service_urls.py switches one on a real broker)."""

    class Provider(pulsarfast.ServiceInfoProvider):
        closed = False

        def initial_service_info(self):
            return pulsarfast.ServiceInfo(NOWHERE)

        def initialize(self, on_service_info_update):
            self.update = on_service_info_update

        def close(self):
            self.closed = True

    provider = Provider()
    client = pulsarfast.Client(provider)
    assert client.get_service_info().service_url == NOWHERE
    assert callable(provider.update)
    client.close()
    assert provider.closed


@pytest.mark.parametrize("url, kwargs", [
    ("pulsar://127.0.0.1:1", {}),
    ("pulsar://127.0.0.1:1,127.0.0.1:2", {"tls_trust_certs_file_path": "TRUST"}),
    ("pulsar+ssl://127.0.0.1:1", {"tls_trust_certs_file_path": "TRUST"}),
])
def test_get_service_info(url, kwargs):
    certifi = pytest.importorskip("certifi")
    kwargs = {key: certifi.where() if value == "TRUST" else value for key, value in kwargs.items()}
    infos = []
    for pulsar in (official, pulsarfast):
        extra = {"backend": "threads"} if pulsar is pulsarfast else {"logger": OFFICIAL_LOGGER}
        client = pulsar.Client(url, **kwargs, **extra)
        open_info = client.get_service_info()
        client.close()
        closed_info = client.get_service_info()  # (after close too)
        assert type(open_info) is pulsar.ServiceInfo
        infos.append((repr(open_info), repr(closed_info)))
    theirs, ours = infos
    if "tls_trust_certs_file_path" in kwargs:
        assert ours == theirs
    else:  # the official client reports the certifi file it uses; pulsarfast uses the system's CAs
        assert ours[0] == theirs[0].replace(repr(certifi.where()), "None")


# ----------------------------------------------------------------------------- encryption_context


def test_encryption_context_of_a_message_built_by_hand():
    message = pulsarfast.Message(b"x", pulsarfast.MessageId(0, 1, 2), "persistent://public/default/t")
    assert message.encryption_context() is None


def test_encryption_context_of_received_messages(pulsar_broker, client, pulsar_topic):
    topic = full(pulsar_topic)
    # the official client's part first, whole (its calls block in C++, gevent's hub too)
    theirs = official_client(pulsar_broker)
    try:
        consumer = theirs.subscribe(topic, "official-sub")
        produce(theirs, topic, [b"from official"])
        official_message = consumer.receive(timeout_millis=10_000)
        official_context = official_message.encryption_context()
        consumer.close()
    finally:
        theirs.close()
    assert official_context is None
    consumer = client.subscribe(topic, "fast-sub", initial_position=pulsarfast.InitialPosition.Earliest)
    produce(client, topic, [b"from pulsarfast"])
    received = [consumer.receive(timeout_millis=10_000) for _ in range(2)]
    assert sorted(message.data() for message in received) == [b"from official", b"from pulsarfast"]
    assert [message.encryption_context() for message in received] == [None, None]
