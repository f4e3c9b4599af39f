# Partition-key routing must match the official Pulsar Python client.
#
# tests/pulsar/data/pulsar_key_partitions.json was recorded against a real broker with
# the official pulsar-client wheel: for each key, hashing scheme and partition
# count, the partition its producer chose (MessageId.partition()). Every row must
# be reproduced by pulsarfast.wire.hashing without a broker or the official client.
from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from pulsarfast.wire import hashing

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pulsar_key_partitions.json")


def _load():
    with open(DATA, encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["row_fields"] == ["k", "scheme", "partitions", "partition", "via"]
    return doc["keys"], doc["rows"]


KEYS, ROWS = _load()


@pytest.mark.pure
def test_table_covers_every_scheme_and_the_default():
    seen = Counter((scheme, via.split("/")[0]) for _, scheme, _, _, via in ROWS)
    for scheme in ("BoostHash", "JavaStringHash", "Murmur3_32Hash"):
        assert seen[(scheme, "c-api")] >= 200 * 3
    assert seen[("BoostHash", "python-default")] >= 200 * 3
    assert set(hashing.HASHING_SCHEMES) == {"BoostHash", "JavaStringHash", "Murmur3_32Hash"}


@pytest.mark.pure
@pytest.mark.parametrize("scheme", ["BoostHash", "JavaStringHash", "Murmur3_32Hash"])
def test_partition_for_key_matches_official_client(scheme):
    rows = [r for r in ROWS if r[1] == scheme]
    assert rows
    wrong = []
    for k, _, partitions, partition, via in rows:
        got = hashing.partition_for_key(KEYS[k], partitions, scheme)
        if got != partition:
            wrong.append((KEYS[k][:40], partitions, partition, got, via))
    assert not wrong, "%d/%d rows differ, first: %r" % (len(wrong), len(rows), wrong[:5])


@pytest.mark.pure
def test_default_scheme_is_what_the_python_client_uses():
    assert hashing.DEFAULT_HASHING_SCHEME == "BoostHash"
    for k, _, partitions, partition, via in ROWS:
        if via.startswith("python-default/"):
            assert hashing.partition_for_key(KEYS[k], partitions) == partition, (KEYS[k][:40], via)


@pytest.mark.pure
@pytest.mark.parametrize("fn", [hashing.boost_hash, hashing.java_string_hash, hashing.murmur3_32_hash])
def test_hashes_are_non_negative_31_bit(fn):
    for key in KEYS + [""]:
        h = fn(key)
        assert isinstance(h, int) and 0 <= h <= 0x7FFFFFFF


@pytest.mark.pure
def test_known_values():
    # ASCII keys: the C++ JavaStringHash equals Java's String.hashCode() & 0x7fffffff.
    assert hashing.java_string_hash("hello") == 99162322
    assert hashing.java_string_hash("") == 0
    # MurmurHash3 x86_32, seed 0, published test vector for "hello" (0x248bfa47).
    assert hashing.murmur3_32_hash("hello") == 0x248BFA47 & 0x7FFFFFFF
    assert hashing.murmur3_32_hash("") == 0


@pytest.mark.pure
def test_single_partition_and_bad_scheme():
    assert hashing.partition_for_key("anything", 1, "BoostHash") == 0
    with pytest.raises(ValueError):
        hashing.partition_for_key("k", 4, "NoSuchHash")
