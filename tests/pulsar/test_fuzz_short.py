# A few seconds of fuzz/fuzz_pulsar.py in every `make test`: frames built by pulsarfast's own
# encoders, mutated (bits, sizes, protobuf keys, splices, and re-framed with a correct crc32c),
# cut into chunks and fed to the compiled wire decoders and their pure twin, then to the
# generic command decoder and the sansio receiving path. Only ProtocolError may come out and
# the twins must agree. The long run (1,000,000 inputs, atheris) is `make fuzz`.
from __future__ import annotations

import os
import struct
import sys

import pytest

from pulsarfast.base.results import ProtocolError
from pulsarfast.wire import codec, proto

from tests.support.twins import compiled_or_skip

compiled_or_skip(codec, "pulsarfast.wire._codec", module_level=True)

from tests.support.servers import REPO_ROOT  # noqa: E402

sys.path.insert(0, os.path.join(REPO_ROOT, "fuzz"))
import fuzz_pulsar  # noqa: E402

#: Inputs per run of the short fuzz; the seed changes with PULSAR_FUZZ_SEED.
SHORT_RUNS = int(os.environ.get("PULSAR_FUZZ_SHORT_RUNS", "5000"))
SEED = int(os.environ.get("PULSAR_FUZZ_SEED", "20261124"))

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", autouse=True)
def _setup():
    fuzz_pulsar.setup()


def test_short_mutation_fuzz_finds_no_crash_and_no_disagreement(record_property):
    figures = fuzz_pulsar.run_mutate(SHORT_RUNS, SEED, progress=0)
    assert figures["inputs"] == SHORT_RUNS
    assert figures["distinct_outcomes"] > 100  # the inputs really reach many decoder paths
    record_property("inputs", figures["inputs"])
    record_property("seed", SEED)


def test_seeds_are_valid_frames_that_reach_every_decoder():
    """The seeds come from the package's encoders: they decode without error, and among them are
    MESSAGEs, batches the splitters take apart, and commands of other types."""
    seeds = fuzz_pulsar.seed_frames(__import__("random").Random(1))
    messages = batches = others = 0
    for data in seeds[:30]:
        frames = codec.python_impl.FrameDecoder(2**32 - 1).feed(data[fuzz_pulsar.HEADER:])
        for command, metadata, payload, checksum_ok in frames:
            assert checksum_ok
            decoded = codec.python_impl.decode_message(command, metadata) if metadata is not None else None
            if decoded is None:
                others += 1
                proto.decode_command(command)
                continue
            messages += 1
            if decoded[12] is not None:
                batches += 1
                assert len(codec.compiled_impl.split_batch_decoded(payload, decoded[12])) == decoded[12]
    assert messages and batches and others


# -- regressions: inputs the fuzzer found --------------------------------------------------


def test_a_length_delimited_command_type_is_a_protocol_error_not_a_type_error():
    # BaseCommand.type (field 1) written as a length-delimited field: its value is bytes, and
    # decode_command compared it with 0 (TypeError) before checking it was a number
    for command in (b"\x0a\x00", b"\x0a\x01\x09", b"\x0a\x00\x4a\x00"):
        with pytest.raises(ProtocolError, match="without a type"):
            proto.decode_command(command)
    frame = codec.encode_simple(b"\x0a\x00")
    fuzz_pulsar.check(b"\x05\x00" + b"\0" * (fuzz_pulsar.HEADER - 2) + frame)


HOSTILE = [
    struct.pack(">I", 2**32 - 1),  # a 4 GB frame announced
    struct.pack(">II", 12, 2**32 - 1) + b"\0" * 8,  # a command size past its frame
    struct.pack(">II", 8, 4) + b"\x0a\x00\x08\x09",  # length-delimited type, then MESSAGE
    struct.pack(">II", 10, 6) + b"\x08\x09\x4a\x00\x0e\x01",  # MESSAGE cut in its checksum
    struct.pack(">II", 14, 6) + b"\x08\x09\x4a\x00\x0e\x01" + b"\0\0\0\0",  # cut in the metadata size
    # a MESSAGE whose batch count is huge and whose payload is empty
    codec.encode_payload(proto.base_command(proto.MESSAGE, proto.f_uint(1, 1) + proto.f_bytes(2, proto.message_id_data(1, 2))),
                        proto.message_metadata("p", 1, 2, num_messages_in_batch=2**40), b""),
    # a batch entry whose payload_size is length-delimited, and one of 2**31
    codec.encode_payload(proto.base_command(proto.MESSAGE, proto.f_uint(1, 1) + proto.f_bytes(2, proto.message_id_data(1, 2))),
                        proto.message_metadata("p", 1, 2, num_messages_in_batch=2),
                        codec.encode_batch_entry(b"\x1a\x01\x05", b"x") + codec.encode_batch_entry(proto.f_uint(3, 2**31), b"y")),
    # metadata with bad UTF-8 in the producer name, a property key and the partition key
    codec.encode_payload(proto.base_command(proto.MESSAGE, proto.f_uint(1, 1) + proto.f_bytes(2, proto.message_id_data(1, 2))),
                        b"\x0a\x01\xff\x22\x03\x0a\x01\xc3\x32\x02\xc3\x28", b"z"),
]


@pytest.mark.parametrize("stream", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("layout", [b"\x05\x00", b"\x05\x01", b"\x05\x02\x02\xe0", b"\x06\x03\x00\x01\x02\x03\x04",
                                    b"\x00\x00", b"\x07\x0d"],
                         ids=["default-whole", "default-bytewise", "default-3-byte-chunks-count7",
                              "4GiB-chunk-pattern", "max8-whole", "2**40-bytewise-memoryview"])
def test_hostile_streams_agree_in_every_chunking(stream, layout):
    # layout: byte 0 = max frame size choice, byte 1 = chunking and buffer type, byte 2 = chunk
    # size and extra batch count (see fuzz_pulsar.split)
    fuzz_pulsar.check(layout.ljust(fuzz_pulsar.HEADER, b"\0") + stream)


def test_mismatch_is_detected():
    """The harness itself: twins that disagree must be reported, not missed."""

    class Lying:
        __name__ = "lying"
        FrameDecoder = codec.python_impl.FrameDecoder
        read_fields = staticmethod(codec.python_impl.read_fields)
        split_batch = staticmethod(codec.python_impl.split_batch)
        split_batch_decoded = staticmethod(codec.python_impl.split_batch_decoded)

        @staticmethod
        def decode_message(command, metadata):
            fields = codec.python_impl.decode_message(command, metadata)
            return fields if fields is None else fields[:-1] + (not fields[-1],)

    real = fuzz_pulsar.CY
    fuzz_pulsar.CY = Lying
    try:
        seed = fuzz_pulsar.seed_frames(__import__("random").Random(1))
        with pytest.raises(fuzz_pulsar.Mismatch):
            for data in seed:
                fuzz_pulsar.check(data)
    finally:
        fuzz_pulsar.CY = real
