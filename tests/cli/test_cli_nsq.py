# The nsqfast console script (nsq/cli/) as a user runs it, against real nsqd and nsqlookupd:
# pub lines then tail them back, --json, -n taking no more than asked, clean ends (signals, a
# closed pipe), stat's depths and rates, one-line errors for bad and unreachable addresses,
# --help and --version.
from __future__ import annotations

import base64
import json
import signal

import pytest

import nsq
from tests.support.cli_tools import assert_one_line_error, lines, popen, run
from tests.support.servers import free_port, wait_until

pytestmark = pytest.mark.timeout(120)


def nsqfast(*args: str, input: bytes | None = None):
    return run("nsqfast", *args, input=input)


def test_pub_then_tail_gives_back_the_lines(nsqd, topic):
    sent = ["line %d" % i for i in range(500)] + ["ünïcödé ✓", "tab\tin it"]
    published = nsqfast("pub", topic, "--nsqd-tcp-address", nsqd.tcp_address, "--batch-size", "64",
                        input=("\n".join(sent) + "\n").encode())
    assert published.returncode == 0, published.stderr
    summary = published.stderr.decode()
    assert "published %s lines to %s" % (format(len(sent), ","), topic) in summary
    assert summary.count("\n") == 1  # (no progress counter: stderr is not a terminal)
    assert nsqd.message_count(topic) == len(sent)

    tailed = nsqfast("tail", topic, "--nsqd-tcp-address", nsqd.tcp_address, "-n", str(len(sent)))
    assert tailed.returncode == 0, tailed.stderr
    assert sorted(lines(tailed.stdout)) == sorted(sent)  # (NSQ does not promise the order)
    assert tailed.stderr == b""


def test_pub_reads_files_in_order_and_skips_empty_lines(nsqd, topic, tmp_path):
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_bytes(b"a1\r\n\r\na2\n")
    second.write_bytes(b"b1\n\nb2")  # (a last line without its newline counts)
    published = nsqfast("pub", topic, str(first), str(second), "--nsqd-tcp-address", nsqd.tcp_address)
    assert published.returncode == 0, published.stderr
    assert "(2 empty lines skipped)" in published.stderr.decode()
    tailed = nsqfast("tail", topic, "--nsqd-tcp-address", nsqd.tcp_address, "-n", "4")
    assert sorted(lines(tailed.stdout)) == ["a1", "a2", "b1", "b2"]


def test_pub_publishes_a_line_when_the_input_pauses_and_sigterm_stops_it(nsqd, topic):
    process = popen("nsqfast", "pub", topic, "--nsqd-tcp-address", nsqd.tcp_address, stdin_pipe=True)
    try:
        process.stdin.write(b"first\n")
        process.stdin.flush()  # and nothing more: the batch of one leaves after --linger
        wait_until(lambda: nsqd.message_count(topic) == 1 or process.poll() is not None, timeout=30)
        assert nsqd.message_count(topic) == 1
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130  # interrupted: not known to have published everything it was given
    assert err.decode().startswith("interrupted: published 1 lines to %s" % topic) and err.count(b"\n") == 1


def test_pub_fails_when_nsqd_refuses_a_line_and_says_how_many_got_in(nsqd_factory, topic):
    nsqd = nsqd_factory("--max-msg-size=100")
    data = b"ok 1\nok 2\nok 3\n" + b"x" * 200 + b"\nnever\n"
    published = nsqfast("pub", topic, "--nsqd-tcp-address", nsqd.tcp_address, "--batch-size", "1", input=data)
    assert_one_line_error(published, "nsqfast pub", "E_BAD_MESSAGE", "3 lines were published and acknowledged")
    assert nsqd.message_count(topic) == 3


def test_tail_finds_nsqd_through_nsqlookupd(nsqlookupd, nsqd_factory, topic):
    nsqd = nsqd_factory(lookupd=nsqlookupd)
    nsqd.http_post("/mpub", params={"topic": topic}, data=b"x\ny")
    wait_until(lambda: topic in nsqlookupd.http_get("/topics").get("topics", []), message="lookupd to list the topic")
    tailed = nsqfast("tail", topic, "--lookupd-http-address", nsqlookupd.http_address, "-n", "2")
    assert tailed.returncode == 0, tailed.stderr
    assert sorted(lines(tailed.stdout)) == ["x", "y"]


def test_tail_json_has_id_attempts_timestamp_and_the_body_as_text_or_base64(nsqd, topic):
    binary = b"\xff\xfe\x00bin"
    nsqd.http_post("/pub", params={"topic": topic}, data="héllo".encode())
    nsqd.http_post("/pub", params={"topic": topic}, data=binary)
    tailed = nsqfast("tail", topic, "--nsqd-tcp-address", nsqd.tcp_address, "-n", "2", "--json")
    assert tailed.returncode == 0, tailed.stderr
    records = [json.loads(line) for line in lines(tailed.stdout)]
    assert len(records) == 2
    for record in records:
        assert set(record) == {"id", "attempts", "timestamp", "body", "body_encoding"}
        assert len(record["id"]) == 16 and int(record["id"], 16) >= 0
        assert record["attempts"] == 1
        assert isinstance(record["timestamp"], int) and record["timestamp"] > 0
    bodies = {r["body_encoding"]: r["body"] for r in records}
    assert bodies["utf-8"] == "héllo"
    assert base64.b64decode(bodies["base64"]) == binary


def test_tail_finishes_what_it_prints_and_takes_no_more_than_n(nsqd, topic):
    nsqd.create_topic(topic)
    nsqd.http_post("/channel/create", params={"topic": topic, "channel": "archive"})
    nsqd.http_post("/mpub", params={"topic": topic}, data=b"\n".join(b"m%d" % i for i in range(10)))
    tailed = nsqfast("tail", topic, "--channel", "archive", "--nsqd-tcp-address", nsqd.tcp_address, "-n", "4",
                     "--max-in-flight", "3")
    assert tailed.returncode == 0, tailed.stderr
    assert len(lines(tailed.stdout)) == 4
    channel = nsqd.channel_stats(topic, "archive")
    assert (channel["depth"], channel["in_flight_count"], channel["requeue_count"]) == (6, 0, 0)


def test_tail_uses_an_ephemeral_channel_by_default(nsqd, topic):
    nsqd.http_post("/pub", params={"topic": topic}, data=b"one")
    tailed = nsqfast("tail", topic, "--nsqd-tcp-address", nsqd.tcp_address, "-n", "1")
    assert lines(tailed.stdout) == ["one"]
    # nsqd deletes an ephemeral channel when its last client leaves
    wait_until(lambda: not (nsqd.topic_stats(topic) or {}).get("channels"), message="the channel to go")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_tail_ends_cleanly_on_a_signal(nsqd, topic, signum):
    process = popen("nsqfast", "tail", topic, "--channel", "watch", "--nsqd-tcp-address", nsqd.tcp_address)
    try:
        wait_until(lambda: nsqd.clients(topic, "watch") or process.poll() is not None, timeout=30)
        process.send_signal(signum)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert (process.returncode, out, err) == (0, b"", b"")
    wait_until(lambda: not nsqd.clients(topic, "watch"), message="tail's connection to close")


def test_tail_ends_cleanly_when_its_reader_goes_away(nsqd, topic):
    process = popen("nsqfast", "tail", topic, "--channel", "piped", "--nsqd-tcp-address", nsqd.tcp_address)
    try:
        wait_until(lambda: nsqd.clients(topic, "piped") or process.poll() is not None, timeout=30)
        nsqd.http_post("/pub", params={"topic": topic}, data=b"first")
        assert process.stdout.readline() == b"first\n"
        process.stdout.close()  # like `| head -1` exiting
        nsqd.http_post("/pub", params={"topic": topic}, data=b"second")
        returncode = process.wait(timeout=30)
        err = process.stderr.read()
    finally:
        process.kill()
    assert (returncode, err) == (0, b"")
    # "second" was not printed: it went back to the channel, not lost
    wait_until(lambda: nsqd.channel_depth(topic, "piped") == 1, message="'second' back in the channel")


def _table_row(output: bytes, name: str) -> dict:
    """The row of TOPIC/CHANNEL name in stat's table, by column title."""
    table = lines(output)
    header = next(line for line in table if line.startswith("TOPIC/CHANNEL"))
    row = next(line for line in table if line.split()[0] == name)
    titles = header.split()
    cells = row.split()
    if len(cells) != len(titles):  # a topic's own row leaves the per-channel cells empty
        return {"TOPIC/CHANNEL": cells[0]}
    return dict(zip(titles, cells))


def test_stat_shows_the_depth_of_a_channel_with_a_backlog(nsqd, topic):
    nsqd.create_topic(topic)
    nsqd.http_post("/channel/create", params={"topic": topic, "channel": "backlog"})
    nsqd.http_post("/mpub", params={"topic": topic}, data=b"\n".join(b"m%d" % i for i in range(7)))
    stat = nsqfast("stat", "--nsqd-http-address", nsqd.http_address, "--topic", topic, "--count", "1")
    assert stat.returncode == 0, stat.stderr
    row = _table_row(stat.stdout, "%s/backlog" % topic)
    assert (row["DEPTH"], row["MEM"], row["DISK"], row["IN-FLT"], row["MSGS"], row["MSGS/S"]) == \
        ("7", "7", "0", "0", "7", "-")


def test_stat_finds_nsqd_through_nsqlookupd_and_filters_by_channel(nsqlookupd, nsqd_factory, topic):
    nsqd = nsqd_factory(lookupd=nsqlookupd)
    nsqd.create_topic(topic)
    for channel in ("wanted", "other"):
        nsqd.http_post("/channel/create", params={"topic": topic, "channel": channel})
    nsqd.http_post("/mpub", params={"topic": topic}, data=b"a\nb\nc")
    wait_until(lambda: topic in nsqlookupd.http_get("/topics").get("topics", []), message="lookupd to list the topic")
    stat = nsqfast("stat", "--lookupd-http-address", nsqlookupd.http_address, "--topic", topic,
                   "--channel", "wanted", "--count", "1", "--json")
    assert stat.returncode == 0, stat.stderr
    records = [json.loads(line) for line in lines(stat.stdout)]
    assert [(r["topic"], r["channel"], r["depth"]) for r in records] == [(topic, "wanted", 3)]


def test_stat_computes_rates_between_refreshes(nsqd, topic):
    nsqd.create_topic(topic)
    nsqd.http_post("/channel/create", params={"topic": topic, "channel": "idle"})
    stat = nsqfast("stat", "--nsqd-http-address", nsqd.http_address, "--topic", topic, "--channel", "idle",
                   "--count", "2", "--interval", "0.1", "--json")
    assert stat.returncode == 0, stat.stderr
    rates = [json.loads(line)["rate"] for line in lines(stat.stdout)]
    assert rates == [None, 0.0]  # none before a second refresh; nothing published in between


BAD_ADDRESSES = [
    ("tail", "t", "--nsqd-tcp-address", "nowhere"),
    ("tail", "t", "--nsqd-tcp-address", "127.0.0.1:99999"),
    ("tail", "t", "--lookupd-http-address", "ftp://127.0.0.1:4161"),
    ("pub", "t", "--nsqd-tcp-address", "127.0.0.1"),
    ("stat", "--nsqd-http-address", "127.0.0.1:http"),
    ("stat", "--lookupd-http-address", "[::1"),
    ("stat", "--lookupd-http-address", "http://[::1:4161"),
    ("stat", "--nsqd-http-address", "http://127.0.0.1:port"),
]


@pytest.mark.parametrize("args", BAD_ADDRESSES, ids=[" ".join(a) for a in BAD_ADDRESSES])
def test_a_bad_address_is_one_line_and_a_failure(args):
    result = nsqfast(*args, input=b"x\n")
    assert_one_line_error(result, "nsqfast " + args[0], args[-1])


UNREACHABLE = [
    ("tail", "t", "--nsqd-tcp-address"),
    ("tail", "t", "--lookupd-http-address"),
    ("pub", "t", "--nsqd-tcp-address"),
    ("stat", "--nsqd-http-address"),
    ("stat", "--lookupd-http-address"),
]


@pytest.mark.parametrize("args", UNREACHABLE, ids=[" ".join(a) for a in UNREACHABLE])
def test_an_unreachable_server_is_one_line_and_a_failure(args):
    address = "127.0.0.1:%d" % free_port()  # nothing listens there
    result = nsqfast(*args, address, "--connect-timeout", "2", input=b"x\n")
    assert_one_line_error(result, "nsqfast " + args[0], address, "refused")


def test_an_nsqd_http_port_given_as_its_tcp_port_is_one_line(nsqd):
    result = nsqfast("tail", "t", "--nsqd-tcp-address", nsqd.http_address, "--connect-timeout", "2")
    assert_one_line_error(result, "nsqfast tail", nsqd.http_address, "TCP port")


def test_a_missing_input_file_is_one_line(nsqd, topic, tmp_path):
    result = nsqfast("pub", topic, str(tmp_path / "missing.log"), "--nsqd-tcp-address", nsqd.tcp_address)
    assert_one_line_error(result, "nsqfast pub", "missing.log")
    assert nsqd.topic_stats(topic) is None  # nothing was published (the topic was never made)


@pytest.mark.parametrize("command", ["tail", "pub", "stat"])
def test_help_shows_an_example(command):
    result = nsqfast(command, "--help")
    assert result.returncode == 0
    text = result.stdout.decode()
    assert "example:" in text and "nsqfast %s " % command in text.split("example:", 1)[1]


def test_help_lists_the_commands_and_version_says_the_version():
    result = nsqfast("--help")
    text = result.stdout.decode()
    assert result.returncode == 0
    for command in ("tail", "pub", "stat"):
        assert "\n    %s " % command in text
    version = nsqfast("--version")
    assert (version.returncode, version.stdout.decode().strip()) == (0, "nsqfast %s" % nsq.__version__)
