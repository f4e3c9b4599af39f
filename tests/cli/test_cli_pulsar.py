# The pulsarfast console script (pulsarfast/cli/) as a user runs it, against the session's real
# Pulsar broker: pub lines then tail them back, --json with key and properties, a non-durable
# subscription by default and an acknowledging durable one when named, clean ends on signals,
# one-line errors for bad and unreachable service URLs, --help and --version.
from __future__ import annotations

import base64
import json
import signal

import pytest

import pulsarfast
from tests.support.cli_tools import assert_one_line_error, lines, popen, run
from tests.support.pulsar_helpers import full
from tests.support.servers import free_port, wait_until

pytestmark = pytest.mark.timeout(180)


def pulsarfast_cli(*args: str, input: bytes | None = None):
    return run("pulsarfast", *args, input=input)


def test_pub_then_tail_gives_back_the_lines_in_order(pulsar_service_url, pulsar_topic):
    sent = ["line %d" % i for i in range(300)] + ["", "ünïcödé ✓"]  # (Pulsar carries empty messages)
    published = pulsarfast_cli("pub", pulsar_topic, "-u", pulsar_service_url, "--batch-size", "50",
                               input=("\n".join(sent) + "\n").encode())
    assert published.returncode == 0, published.stderr
    assert "published %s lines to %s" % (len(sent), pulsar_topic) in published.stderr.decode()

    tailed = pulsarfast_cli("tail", pulsar_topic, "-u", pulsar_service_url, "--position", "earliest",
                            "-n", str(len(sent)))
    assert tailed.returncode == 0, tailed.stderr
    assert lines(tailed.stdout) == sent
    assert tailed.stderr == b""


def test_tail_json_has_id_timestamp_properties_key_and_the_body(pulsar_service_url, pulsar_topic):
    binary = b"\xff\xfe\x00bin"
    published = pulsarfast_cli("pub", pulsar_topic, "-u", pulsar_service_url, "--key", "user-1",
                               "--property", "source=cli", "--property", "n=1", input="héllo\n".encode() + binary)
    assert published.returncode == 0, published.stderr
    tailed = pulsarfast_cli("tail", pulsar_topic, "-u", pulsar_service_url, "--position", "earliest", "-n", "2",
                            "--json")
    assert tailed.returncode == 0, tailed.stderr
    first, second = [json.loads(line) for line in lines(tailed.stdout)]
    for record in (first, second):
        assert set(record) == {"message_id", "topic", "publish_timestamp", "event_timestamp", "properties", "key",
                               "body", "body_encoding"}
        assert record["topic"] == full(pulsar_topic)
        assert record["properties"] == {"source": "cli", "n": "1"}
        assert record["key"] == "user-1"
        assert isinstance(record["publish_timestamp"], int) and record["publish_timestamp"] > 0
        assert record["event_timestamp"] is None
    assert first["message_id"] != second["message_id"]
    assert (first["body"], first["body_encoding"]) == ("héllo", "utf-8")
    assert second["body_encoding"] == "base64" and base64.b64decode(second["body"]) == binary


def test_tail_leaves_no_subscription_behind_by_default(pulsar_broker, pulsar_topic):
    pulsarfast_cli("pub", pulsar_topic, "-u", pulsar_broker.service_url, input=b"one\n")
    tailed = pulsarfast_cli("tail", pulsar_topic, "-u", pulsar_broker.service_url, "--position", "earliest",
                            "-n", "1")
    assert lines(tailed.stdout) == ["one"]
    wait_until(lambda: pulsar_broker.topic_stats(pulsar_topic)["subscriptions"] == {}, timeout=30,
               message="the non-durable subscription to go")


def test_tail_on_a_named_subscription_acknowledges_what_it_prints(pulsar_broker, pulsar_topic):
    url = pulsar_broker.service_url
    # one entry per message (--batch-size 1): the broker acknowledges whole entries, and a batch
    # read in part is delivered again whole
    pulsarfast_cli("pub", pulsar_topic, "-u", url, "--batch-size", "1", input=b"a\nb\nc\nd\n")
    tailed = pulsarfast_cli("tail", pulsar_topic, "-u", url, "--subscription", "keep", "--position", "earliest",
                            "-n", "3")
    assert lines(tailed.stdout) == ["a", "b", "c"]
    subscription = pulsar_broker.topic_stats(pulsar_topic)["subscriptions"]["keep"]
    assert subscription["msgBacklog"] == 1  # kept after the command, with d still to read
    again = pulsarfast_cli("tail", pulsar_topic, "-u", url, "--subscription", "keep", "-n", "1")
    assert lines(again.stdout) == ["d"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_tail_ends_cleanly_on_a_signal(pulsar_broker, pulsar_topic, signum):
    process = popen("pulsarfast", "tail", pulsar_topic, "-u", pulsar_broker.service_url, "--subscription", "watch")

    def subscribed() -> bool:
        try:
            return bool(pulsar_broker.topic_stats(pulsar_topic)["subscriptions"].get("watch", {}).get("consumers"))
        except Exception:  # (the topic does not exist until the consumer makes it)
            return process.poll() is not None

    try:
        wait_until(subscribed, timeout=60)
        process.send_signal(signum)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert (process.returncode, out, err) == (0, b"", b"")


@pytest.mark.parametrize("command", ["tail", "pub"])
def test_an_unreachable_broker_is_one_line_and_a_failure(command):
    url = "pulsar://127.0.0.1:%d" % free_port()  # nothing listens there
    result = pulsarfast_cli(command, "t", "-u", url, "--connect-timeout", "2", input=b"x\n")
    assert_one_line_error(result, "pulsarfast " + command, url, "refused")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:6650", "pulsar://127.0.0.1:port", "pulsar://"])
@pytest.mark.parametrize("command", ["tail", "pub"])
def test_a_bad_service_url_is_one_line_and_a_failure(command, url):
    result = pulsarfast_cli(command, "t", "-u", url, input=b"x\n")
    assert_one_line_error(result, "pulsarfast " + command, "--service-url", url)


@pytest.mark.parametrize("command", ["tail", "pub"])
def test_help_shows_an_example(command):
    result = pulsarfast_cli(command, "--help")
    assert result.returncode == 0
    text = result.stdout.decode()
    assert "example:" in text and "pulsarfast %s " % command in text.split("example:", 1)[1]


def test_help_lists_the_commands_and_version_says_the_version():
    text = pulsarfast_cli("--help").stdout.decode()
    for command in ("tail", "pub"):
        assert "\n    %s " % command in text
    version = pulsarfast_cli("--version")
    assert (version.returncode, version.stdout.decode().strip()) == (0, "pulsarfast %s" % pulsarfast.__version__)
