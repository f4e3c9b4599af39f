# A few seconds of fuzz/fuzz_decoder.py in every `make test`: random and mutated
# streams, cut into chunks, fed to the compiled decoder and to its pure twin;
# only ProtocolError may come out, and the two must agree on every feed(). The
# long runs (10,000,000 inputs, atheris, AddressSanitizer) are `make fuzz`.
from __future__ import annotations

import os
import struct
import sys

import pytest

from nsq import codec

from tests.support.twins import compiled_or_skip

compiled_or_skip(codec, "nsq._frame", module_level=True)

from tests.support.servers import REPO_ROOT  # noqa: E402

sys.path.insert(0, os.path.join(REPO_ROOT, "fuzz"))
import fuzz_decoder  # noqa: E402

#: Inputs per run of the short fuzz; the seed changes with NSQ_FUZZ_SEED.
SHORT_RUNS = int(os.environ.get("NSQ_FUZZ_SHORT_RUNS", "80000"))
SEED = int(os.environ.get("NSQ_FUZZ_SEED", "20240601"))

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", autouse=True)
def _setup():
    fuzz_decoder.setup()


@pytest.mark.slow  # (a few seconds of fuzzing, 5-20 s on a loaded machine)
def test_short_mutation_fuzz_finds_no_crash_and_no_disagreement(record_property):
    figures = fuzz_decoder.run_mutate(SHORT_RUNS, SEED, progress=0)
    assert figures["inputs"] == SHORT_RUNS
    assert figures["distinct_outcomes"] > 50  # the inputs really reach many decoder paths
    record_property("inputs", figures["inputs"])
    record_property("seed", SEED)


HOSTILE = [
    struct.pack(">I", 2**32 - 1),  # 4 GB prefix
    struct.pack(">II", 2**31, 2) + b"\0" * 64,  # 2 GB message
    struct.pack(">II", 16 * 1024 * 1024, 0) + b"x" * 1000,  # at the default maximum, truncated
    struct.pack(">II", 16 * 1024 * 1024 + 1, 0),  # just over it
    struct.pack(">II", 0, 0), struct.pack(">II", 3, 0), struct.pack(">II", 4, 0),  # too small / empty
    struct.pack(">II", 8, 3) + b"abcd",  # unknown frame type
    struct.pack(">II", 8, 2**32 - 1) + b"abcd",
    struct.pack(">II", 29, 2) + b"\0" * 25,  # one byte short of a message header
    struct.pack(">II", 30, 2) + b"\0" * 26,  # an empty message
    struct.pack(">II", 6, 0) + b"OK" + struct.pack(">I", 2**31),  # a good frame, then a bad prefix
]


@pytest.mark.parametrize("stream", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("layout", [b"\x05\x00", b"\x05\x01", b"\x05\x02\x02", b"\x06\x03\x00\x01\x02\x03\x04",
                                    b"\x00\x00", b"\x07\x0d"],
                         ids=["16MiB-whole", "16MiB-bytewise", "16MiB-3-byte-chunks", "4GiB-chunk-pattern",
                              "max30-whole", "2**40-bytewise-memoryview"])
def test_hostile_streams_agree_in_every_chunking(stream, layout):
    # layout: byte 0 = max frame size choice, byte 1 = chunking and buffer type (see fuzz_decoder.split)
    fuzz_decoder.check(layout.ljust(fuzz_decoder.HEADER, b"\0") + stream)


def test_mismatch_is_detected():
    """The harness itself: a decoder that disagrees must be reported, not missed."""

    class Lying:
        __name__ = "lying"

        class FrameDecoder(codec.python_impl.FrameDecoder):
            def feed(self, data):
                frames = super().feed(data)
                return frames[:-1] if frames else frames

        decode_message = staticmethod(codec.python_impl.decode_message)

    real = fuzz_decoder.CY
    fuzz_decoder.CY = Lying
    try:
        with pytest.raises(fuzz_decoder.Mismatch):
            fuzz_decoder.check(b"\0" * fuzz_decoder.HEADER + struct.pack(">II", 6, 0) + b"OK")
    finally:
        fuzz_decoder.CY = real
