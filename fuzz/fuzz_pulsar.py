#!/usr/bin/env python3
"""Differential fuzzer for pulsarfast's wire decoders: compiled (pulsarfast.wire._codec) vs
pure (pulsarfast.wire._codec_py), plus the generic command decoder behind them.

Every input is a byte stream from a "broker", cut into chunks. On each input:

* both ``FrameDecoder`` twins are fed the chunks (frames, error class and
  ``pending_bytes()`` after every feed() must agree);
* every frame's command and metadata go through both ``decode_message`` twins
  (whatever the checksum said: a mutation almost always breaks the crc, and the
  decoder must be safe on any bytes); a MESSAGE's payload then through both
  ``split_batch`` and ``split_batch_decoded`` with its ``num_messages_in_batch``
  (and with a count picked by the input header, to reach the splitter often);
* the command goes through ``proto.decode_command`` and the metadata through
  ``proto.decode(MESSAGE_METADATA, ...)`` (the generic path the client takes
  for every frame that is not a MESSAGE), once over each twin's read_fields;
* the whole stream goes through ``sansio.PulsarProtocol.receive_data``, the
  client's real receiving path.

It fails (exit 1, the input saved under build/fuzz/crashes/) when

* anything but ``pulsarfast.base.results.ProtocolError`` comes out (IndexError,
  struct.error, UnicodeDecodeError, TypeError, MemoryError, ... are bugs),
* the twins disagree (a result, or the class of the error),
* the process dies (a crash in the compiled code),
* resident memory grows by more than --max-rss-growth-mb over the run.

Engines (the CLI of fuzz/fuzz_decoder.py):
  mutate   hand-rolled mutation fuzzer seeded with valid frames built by the
           package's own encoders (encode_send_frame, encode_payload,
           proto.message_metadata, batch entries, ...); mutations flip bits,
           write interesting sizes and field keys, splice, truncate, and
           re-frame a mutated command / metadata / payload with a correct size
           and crc32c (so the decoders behind the checksum are reached too).
  atheris  coverage-guided libFuzzer (pip install atheris), coverage from the
           instrumented pure twin.

Usage:
  python fuzz/fuzz_pulsar.py --engine mutate --runs 1000000 --json build/reliability/fuzz-pulsar-mutate.json
  python fuzz/fuzz_pulsar.py --engine atheris --runs 500000
  python fuzz/fuzz_pulsar.py --asan --runs 200000     # compiled twin built with -fsanitize=address

An input's layout: byte 0 picks max_frame_size, byte 1 the chunking and the
buffer type, byte 2 a chunk size and the extra batch count, bytes 3..6 a
chunk-size pattern; the rest is the stream. Any byte string is a valid input.
"""
from __future__ import annotations

import argparse
import os
import random
import struct
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path and not os.environ.get("NSQ_FUZZ_ASAN"):
    sys.path.insert(0, REPO)  # (in ASan mode PYTHONPATH points at the ASan build's copy of the package)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import harness  # noqa: E402 - fuzz/harness.py, beside this file

#: Where runs keep their working files (gitignored): the atheris corpus, failing inputs.
WORK = os.environ.get("PULSAR_FUZZ_WORK") or os.path.join(REPO, "build", "fuzz-pulsar")

HEADER = 7
MAX_FRAME_SIZES = (8, 12, 40, 256, 4096, 5 * 1024 * 1024 + 10 * 1024, 2**32 - 1, 2**40)
MAX_STREAM = 2048  # longer inputs are cut: keeps each run short and the rate high

PY = CY = None
ProtocolError = None
proto = None
sansio = None


def setup() -> None:
    global PY, CY, ProtocolError, proto, sansio
    from pulsarfast.wire import codec

    if codec.compiled_impl is None:
        raise SystemExit("the compiled pulsarfast.wire._codec is not importable: %s" % codec.compiled_import_error)
    PY, CY = codec.python_impl, codec.compiled_impl
    from pulsarfast.wire import proto as proto_module
    from pulsarfast.wire import sansio as sansio_module
    from pulsarfast.base.results import ProtocolError as PE

    ProtocolError = PE
    proto = proto_module
    sansio = sansio_module


class Mismatch(AssertionError):
    pass


def split(data: bytes) -> tuple[int, list, int]:
    """An input -> (max_frame_size, chunks, extra batch count)."""
    head = data[:HEADER].ljust(HEADER, b"\0")
    stream = data[HEADER : HEADER + MAX_STREAM]
    max_frame_size = MAX_FRAME_SIZES[head[0] % len(MAX_FRAME_SIZES)]
    chunks = harness.chunks_of(head, stream, 128)
    return max_frame_size, chunks, head[2] >> 5  # 0..7


def _guard(what: str, fn, *args):
    """("ok", result) or ("error", class name) for ProtocolError; anything else is a bug."""
    try:
        return ("ok", fn(*args))
    except ProtocolError as exc:
        return ("error", type(exc).__name__)
    except Exception as exc:  # noqa: BLE001 - anything else is the bug we look for
        raise Mismatch("%s raised %s: %s" % (what, type(exc).__name__, exc)) from exc


def _frames(impl, max_frame_size: int, chunks: list) -> list:
    decoder = impl.FrameDecoder(max_frame_size)
    out = []
    for chunk in chunks:
        result = _guard(impl.__name__ + ".FrameDecoder.feed", decoder.feed, chunk)
        out.append((result, decoder.pending_bytes()))
        if result[0] == "error":
            poisoned = _guard(impl.__name__ + ".FrameDecoder.feed", decoder.feed, b"\0\0\0\x08\0\0\0\x04\x08\x12\x00\x00")
            if poisoned[0] != "error":
                raise Mismatch("%s accepted data after a ProtocolError" % impl.__name__)
            break
    return out


def _same(what: str, a, b):
    if a != b:
        raise Mismatch("the twins disagree on %s:\n  pure:     %r\n  compiled: %r" % (what, a, b))
    return a


def _both(what: str, name: str, *args):
    return _same("%s%r" % (name, args if len(repr(args)) < 400 else "..."),
                 _guard("_wire_py." + name, getattr(PY, name), *args),
                 _guard("_wire." + name, getattr(CY, name), *args))


def _generic(command: bytes, metadata) -> tuple:
    """proto's generic decoders over each twin's read_fields: only ProtocolError may come out,
    and both twins must give the same record (or error class)."""
    outcomes = []
    saved = proto.read_fields
    try:
        for impl in (PY, CY):
            proto.read_fields = impl.read_fields
            kind = _guard("proto.decode_command", proto.decode_command, command)
            if kind[0] == "ok":
                kind = ("ok", kind[1][0], repr(kind[1][1]))
            meta = None
            if metadata is not None:
                meta = _guard("proto.decode(MESSAGE_METADATA)", proto.decode, proto.MESSAGE_METADATA, metadata)
                if meta[0] == "ok":
                    meta = ("ok", repr(meta[1]))
            outcomes.append((kind, meta))
    finally:
        proto.read_fields = saved
    return _same("proto.decode_command / decode(MESSAGE_METADATA)", outcomes[0], outcomes[1])


def _receive(chunks: list) -> str:
    """The client's receiving path (sansio over the selected twin): events or ProtocolError."""
    protocol = sansio.PulsarProtocol(proto.connect(), name="fuzz")
    protocol.start()
    protocol.data_to_send()
    ending = "ok"
    for chunk in chunks:
        result = _guard("sansio.PulsarProtocol.receive_data", protocol.receive_data, chunk)
        if result[0] == "error":
            ending = "error"
            break
    return ending


def check(data: bytes) -> tuple:
    """Run one input through both twins; returns an outcome signature.

    Raises Mismatch when they disagree or raise anything but ProtocolError."""
    max_frame_size, chunks, extra_count = split(data)
    expected = _same("FrameDecoder.feed", _frames(PY, max_frame_size, chunks), _frames(CY, max_frame_size, chunks))
    kinds = set()
    endings = []
    for result, _pending in expected:
        if result[0] != "ok":
            endings.append("frame-error")
            continue
        for command, metadata, payload, checksum_ok in result[1]:
            decoded = _both("decode_message", "decode_message", command, metadata)
            generic = _generic(command, metadata)
            kind = generic[0][1] if generic[0][0] == "ok" else -1
            kinds.add(kind if kind == -1 or proto.command_schema(kind) is not None else -2)  # -2: unknown type
            if decoded[0] == "error":
                endings.append("message-error")
                continue
            if decoded[1] is None:
                continue
            endings.append("message")
            counts = {extra_count}
            if decoded[1][12] is not None:
                counts.add(decoded[1][12])
                endings.append("batch")
            for count in counts:
                plain = _both("split_batch", "split_batch", payload, count)
                full = _both("split_batch_decoded", "split_batch_decoded", payload, count)
                if plain[0] == "ok" and full[0] == "ok":
                    if [body for _m, body in plain[1]] != [body for _m, body in full[1]]:
                        raise Mismatch("split_batch and split_batch_decoded give other bodies")
                endings.append("split-" + plain[0] + "-" + full[0] + ("-%d" % min(len(plain[1]), 3) if plain[0] == "ok" else ""))
    _receive(chunks)
    pending = expected[-1][1] > 0 if expected else False
    return (tuple(sorted(set(endings))), tuple(sorted(kinds)), max_frame_size, len(chunks) > 1, pending)


# -- seeds: valid frames from the package's own encoders -----------------------------------


def seed_frames(rng: random.Random) -> list[bytes]:
    from pulsarfast.wire import codec

    def message_command(consumer_id, ledger, entry, partition=-1, batch_index=-1, redelivery=0):
        body = proto.f_uint(1, consumer_id) + proto.f_bytes(2, proto.message_id_data(ledger, entry, partition, batch_index))
        if redelivery:
            body += proto.f_uint(3, redelivery)
        return proto.base_command(proto.MESSAGE, body)

    def batch(entries):
        payload = b""
        for props, key, body, seq in entries:
            meta = proto.single_message_metadata(len(body), props, key, event_time=seq * 3, sequence_id=seq,
                                                 ordering_key=key.encode() if key else None)
            payload += codec.encode_batch_entry(meta, body)
        return payload

    frames = [
        codec.encode_simple(proto.ping()), codec.encode_simple(proto.pong()),
        codec.encode_simple(proto.base_command(proto.CONNECTED, proto.f_str(1, "Pulsar Server4.0.7") + proto.f_uint(2, 20)
                                              + proto.f_uint(3, 5 * 1024 * 1024))),
        codec.encode_simple(proto.base_command(proto.SEND_RECEIPT, proto.f_uint(1, 1) + proto.f_uint(2, 7)
                                              + proto.f_bytes(3, proto.message_id_data(12, 34)))),
        codec.encode_simple(proto.base_command(proto.SEND_ERROR, proto.f_uint(1, 1) + proto.f_uint(2, 8) + proto.f_uint(3, 2)
                                              + proto.f_str(4, "persistence error"))),
        codec.encode_simple(proto.base_command(proto.SUCCESS, proto.f_uint(1, 3))),
        codec.encode_simple(proto.base_command(proto.ERROR, proto.f_uint(1, 4) + proto.f_uint(2, 1) + proto.f_str(3, "nope"))),
        codec.encode_simple(proto.base_command(proto.LOOKUP_RESPONSE, proto.f_str(1, "pulsar://127.0.0.1:6650")
                                              + proto.f_uint(3, 1) + proto.f_uint(4, 5) + proto.f_bool(8, True))),
        codec.encode_simple(proto.base_command(proto.CLOSE_CONSUMER, proto.f_uint(1, 2) + proto.f_uint(2, 0))),
        codec.encode_simple(proto.base_command(proto.ACTIVE_CONSUMER_CHANGE, proto.f_uint(1, 2) + proto.f_bool(2, True))),
        codec.encode_simple(proto.base_command(proto.TOPIC_MIGRATED, proto.f_uint(1, 2) + proto.f_uint(2, 1))),
        codec.encode_simple(proto.base_command(proto.GET_LAST_MESSAGE_ID_RESPONSE,
                                              proto.f_bytes(1, proto.message_id_data(5, 6, 0, 2, 4)) + proto.f_uint(2, 9))),
        # a SEND frame, as a producer writes it (a broker never sends one, a decoder must cope)
        codec.encode_send_frame(1, 2, b"producer-1", 1_700_000_000_000, b"hello", [(b"k", b"v")], b"key", 5),
    ]
    metadatas = [
        proto.message_metadata("standalone-0-1", 0, 1_700_000_000_000),
        proto.message_metadata("p", 2**63, 2**64 - 1, properties={"a": "1", "\u00e9": "\u2603"}, partition_key="pk",
                               event_time=5, ordering_key=b"ok", deliver_at_time=-1, replicate_to=["c1"],
                               highest_sequence_id=9, null_value=True),
        proto.message_metadata("p", 1, 2, compression=proto.COMPRESSION_LZ4, uncompressed_size=10),
        proto.message_metadata("p", 1, 2) + proto.f_str(14, "RSA") + proto.f_uint(27, 3) + proto.f_uint(17, 1),
    ]
    for meta in metadatas:
        frames.append(codec.encode_payload(message_command(1, 10, 20, redelivery=1), meta, b"payload"))
    for count in (1, 2, 3, 5):
        entries = [({"i": str(i)} if i % 2 else None, "key-%d" % i if i % 3 else None, b"body-%d" % i * i, i)
                   for i in range(count)]
        meta = proto.message_metadata("batcher", 100, 1_700_000_000_000, num_messages_in_batch=count)
        frames.append(codec.encode_payload(message_command(2, 11, 22, 3, -1), meta, batch(entries)))
    # a batch the producer side writes (batch_entry_metadata)
    payload = b"".join(codec.encode_batch_entry(proto.batch_entry_metadata(len(b), [(b"k", b"v")], b"pk", 0, s), b)
                       for s, b in enumerate((b"x", b"", b"yy")))
    frames.append(codec.encode_payload(message_command(3, 1, 2), proto.message_metadata("q", 1, 2, num_messages_in_batch=3),
                                      payload))
    # a payload frame without the magic and crc (allowed by the protocol)
    command = message_command(4, 1, 1)
    meta = proto.message_metadata("nocrc", 1, 2)
    frames.append(struct.pack(">II", 4 + len(command) + 4 + len(meta) + 3, len(command)) + command
                  + struct.pack(">I", len(meta)) + meta + b"abc")

    seeds = []
    for frame in frames:
        seeds.append(bytes(rng.getrandbits(8) for _ in range(HEADER)) + frame)
    for _ in range(48):
        stream = b"".join(rng.choice(frames) for _ in range(rng.randint(1, 4)))
        seeds.append(bytes(rng.getrandbits(8) for _ in range(HEADER)) + stream)
    for size, command_size in ((0, 0), (3, 0), (4, 0), (4, 5), (8, 2**32 - 1), (2**31, 4), (2**32 - 1, 0)):
        seeds.append(bytes(HEADER) + struct.pack(">II", size, command_size) + b"\x08\x12" + b"\0" * 16)
    return seeds


INTERESTING_U32 = (0, 1, 2, 3, 4, 5, 6, 8, 10, 0x0E01, 255, 256, 4096, 5 * 1024 * 1024 + 10 * 1024,
                   2**31 - 1, 2**31, 2**32 - 1)
#: protobuf bytes worth writing anywhere: keys of fields the decoders read (with each wire
#: type), varints at their limits, bad UTF-8
INTERESTING_BYTES = (
    b"\x08\x09", b"\x08\x12", b"\x4a\x00", b"\x4a\x7f", b"\x12\x00", b"\x0a\x01\xff", b"\x0a\x02\xc3\x28",
    b"\x58\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x58\x80\x80\x80\x80\x08", b"\x58\x7f", b"\x5a\x00",
    b"\x18\xff\xff\xff\xff\x0f", b"\x1a\x00", b"\x1d\0\0\0\0", b"\x19\0\0\0\0\0\0\0\0", b"\x22\x04\x0a\x00\x12\x00",
    b"\x22\x02\x0a\xff", b"\x32\x01\x80", b"\x92\x01\x00", b"\x90\x01\x01", b"\xc8\x01\x01", b"\xd8\x01\x05",
    b"\xe8\x01\x01", b"\x72\x01\xff", b"\x6a\x00", b"\x03", b"\x04", b"\x07", b"\x00", b"\x80" * 11,
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x0e\x01", b"\x22\x80\x01",
)


def _reframe(buf: bytes, rng: random.Random) -> bytes | None:
    """Parse the stream's first frames leniently and write one back with a mutated part and a
    correct size and crc32c (the decoders past the checksum see the mutation)."""
    stream = buf[HEADER:]
    try:
        frames = PY.FrameDecoder(2**32 - 1).feed(stream)
    except ProtocolError:
        return None
    if not frames:
        return None
    index = rng.randrange(len(frames))
    command, metadata, payload, _ok = frames[index]
    parts = [command, metadata if metadata is not None else b"", payload if payload is not None else b""]
    which = rng.randrange(3)
    part = bytearray(parts[which])
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        at = rng.randrange(len(part) + 1)
        if op == 0 and part:
            part[at % len(part)] ^= 1 << rng.randrange(8)
        elif op == 1:
            part[at:at] = rng.choice(INTERESTING_BYTES)
        elif op == 2:
            del part[at:at + rng.randint(1, 8)]
        elif op == 3 and part:
            part[at % len(part)] = rng.randrange(256)
        elif op == 4:
            part[at:at + 4] = struct.pack(">I", rng.choice(INTERESTING_U32))
        else:
            part[at:at] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 6)))
    parts[which] = bytes(part)
    if metadata is None and which == 0 and not rng.randrange(2):
        rebuilt = PY.encode_simple(parts[0])
    else:
        rebuilt = PY.encode_payload(parts[0], parts[1], parts[2])
    frames[index] = None
    out = []
    for i, f in enumerate(frames):
        if f is None:
            out.append(rebuilt)
        elif f[1] is None:
            out.append(PY.encode_simple(f[0]))
        elif f[3]:
            out.append(PY.encode_payload(f[0], f[1], f[2]))
        else:
            out.append(PY.encode_payload(f[0], f[1], f[2]))
    return buf[:HEADER] + b"".join(out)


def mutate(data: bytes, rng: random.Random, corpus: list) -> bytes:
    if rng.randrange(3) == 0:
        framed = _reframe(data, rng)
        if framed is not None:
            return framed[: HEADER + MAX_STREAM]
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(10)
        n = len(buf)
        at = rng.randrange(n + 1)
        if op == 0 and n:
            buf[at % n] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[at % n] = rng.randrange(256)
        elif op == 2:  # an interesting size anywhere
            buf[at:at + 4] = struct.pack(">I", rng.choice(INTERESTING_U32))
        elif op == 3:
            del buf[at:at + rng.randint(1, 16)]
        elif op == 4:
            buf[at:at] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 16)))
        elif op == 5:  # truncate
            del buf[at:]
        elif op == 6:  # splice in part of another input
            other = rng.choice(corpus)
            start = rng.randrange(len(other) + 1)
            buf[at:at] = other[start:start + rng.randint(1, 64)]
        elif op == 7 and n > HEADER:  # duplicate a slice (frames repeated)
            start = rng.randrange(HEADER, n)
            buf[at:at] = buf[start:start + rng.randint(1, 200)]
        elif op == 8:  # protobuf keys and varints at their limits
            buf[at:at] = rng.choice(INTERESTING_BYTES)
        else:  # new chunking only
            buf[0:HEADER] = bytes(rng.getrandbits(8) for _ in range(HEADER))
    return bytes(buf[: HEADER + MAX_STREAM])


# -- memory --------------------------------------------------------------------------------


def rss_kb() -> int:
    return harness.rss_kb()


def save_crash(data: bytes) -> str:
    return harness.save_crash(WORK, data)


# -- engines -------------------------------------------------------------------------------


class Outcomes:
    """The outcome signatures seen, as a fixed bitmap of their crc32 (libFuzzer's coverage map,
    in spirit): memory stays flat however many there are, so the RSS check measures the decoders."""

    BITS = 1 << 20

    def __init__(self) -> None:
        self.seen = bytearray(self.BITS)
        self.count = 0

    def add(self, signature: tuple) -> bool:
        """Whether the signature is new (a crc32 collision counts as seen)."""
        slot = zlib.crc32(repr(signature).encode()) & (self.BITS - 1)
        if self.seen[slot]:
            return False
        self.seen[slot] = 1
        self.count += 1
        return True


def run_mutate(runs: int, seed: int, progress: float = 10.0, corpus_limit: int = 4096,
               max_seconds: float | None = None) -> dict:
    rng = random.Random(seed)
    corpus = seed_frames(rng)
    signatures = Outcomes()
    for data in corpus:
        signatures.add(check(data))
    started = time.monotonic()
    last = started
    rss_start = None
    warmup = min(100_000, runs // 10)
    executed = 0
    stopped_early = False
    for i in range(runs):
        if i == warmup:
            rss_start = rss_kb()  # after the corpus and the caches settled
        data = mutate(rng.choice(corpus), rng, corpus)
        try:
            sig = check(data)
        except Mismatch:
            print("FAILING INPUT saved to %s" % save_crash(data), file=sys.stderr)
            raise
        executed += 1
        if signatures.add(sig):
            if len(corpus) < corpus_limit:
                corpus.append(data)
            else:
                corpus[rng.randrange(len(corpus))] = data
        if i & 0x3FF == 0:
            now = time.monotonic()
            if max_seconds is not None and now - started >= max_seconds:
                stopped_early = True
                break
            if progress and now - last >= progress:
                last = now
                print("  %d inputs, %.0f/s, %d outcomes, corpus %d, rss %d kB"
                      % (i, i / max(now - started, 1e-9), signatures.count, len(corpus), rss_kb()), flush=True)
    elapsed = time.monotonic() - started
    return {
        "inputs": executed, "seconds": round(elapsed, 1), "rate_per_s": round(executed / max(elapsed, 1e-9)),
        "distinct_outcomes": signatures.count, "corpus": len(corpus), "stopped_at_time_limit": stopped_early,
        "rss_start_kb": rss_start if rss_start is not None else rss_kb(), "rss_end_kb": rss_kb(),
    }


def _instrumented() -> None:
    import pulsarfast.wire._codec_py  # noqa: F401 - instrumented for coverage
    import pulsarfast.wire.proto  # noqa: F401


def run_atheris(runs: int, seed: int) -> dict:
    return harness.run_atheris(runs, seed, work=WORK, max_len=HEADER + MAX_STREAM, instrument=_instrumented,
                               setup=setup, check=check, mismatch=Mismatch, seeds=seed_frames, warmup_cap=100_000)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("mutate", "atheris"), default="mutate")
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop the mutate engine after this long (the figures say so)")
    parser.add_argument("--json", help="write the run's figures here")
    parser.add_argument("--max-rss-growth-mb", type=float, default=None,
                        help="fail when resident memory grows more over the run (default 32, or 128 under ASan)")
    parser.add_argument("--asan", action="store_true", help="build the compiled twin with ASan and run under it")
    parser.add_argument("--replay", nargs="*", default=None, help="check these saved inputs and exit")
    args = parser.parse_args(argv)

    if args.asan and not os.environ.get("NSQ_FUZZ_ASAN"):
        import subprocess

        sys.path.insert(0, HERE)
        import build_asan
        import fuzz_decoder

        print("ASan selftest: a build with a seeded overflow must be stopped ...", flush=True)
        selftest = build_asan.selftest(fuzz_decoder.asan_env, package="pulsarfast")
        print("  " + selftest["asan_selftest"], flush=True)
        build_dir = build_asan.build(build_asan.DEFAULT_DIRS["pulsarfast"], package="pulsarfast")
        cmd = [sys.executable, os.path.abspath(__file__), "--engine", args.engine, "--runs", str(args.runs),
               "--seed", str(args.seed)]
        for flag, value in (("--max-rss-growth-mb", args.max_rss_growth_mb), ("--max-seconds", args.max_seconds),
                            ("--json", args.json)):
            if value is not None:
                cmd += [flag, str(value)]
        print("running under AddressSanitizer: %s" % " ".join(cmd), flush=True)
        env = fuzz_decoder.asan_env(build_dir)
        env["NSQ_FUZZ_ASAN_SELFTEST"] = selftest["asan_selftest"]
        return subprocess.call(cmd, env=env)

    if args.engine == "atheris" and os.environ.get("PULSAR_FUZZ_CHILD"):
        run_atheris(args.runs, args.seed)  # does not return: libFuzzer exits the process
        return 0

    setup()
    if args.replay is not None:
        failed = 0
        for path in args.replay:
            with open(path, "rb") as f:
                data = f.read()
            try:
                check(data)
                print("%s: ok" % path)
            except Mismatch as exc:
                failed += 1
                print("%s: FAILED: %s" % (path, exc))
        return 1 if failed else 0
    compiled_path = CY.__file__
    if os.environ.get("NSQ_FUZZ_ASAN") and "pulsarfast-asan" not in compiled_path:
        raise SystemExit("ASan mode but the compiled twin came from %s" % compiled_path)
    print("fuzzing %s against %s with %s, %d inputs, seed %d"
          % (PY.__name__, compiled_path, args.engine, args.runs, args.seed), flush=True)

    if args.engine == "atheris":
        figures = harness.atheris_in_child(__file__, WORK, "PULSAR_FUZZ_CHILD", args.runs, args.seed)
        return 1 if figures is None else finish(args, figures, compiled_path)

    try:
        figures = run_mutate(args.runs, args.seed, max_seconds=args.max_seconds)
    except Mismatch as exc:
        print("FAILED: %s" % exc, file=sys.stderr)
        return 1
    return finish(args, figures, compiled_path)


def finish(args, figures: dict, compiled_path: str) -> int:
    return harness.finish(args, figures, compiled_path, target="pulsarfast wire decoders",
                           implementations=["pulsarfast.wire._codec_py (pure)", "pulsarfast.wire._codec (compiled)"],
                           decoders=["FrameDecoder.feed", "decode_message", "split_batch", "split_batch_decoded",
                                     "proto.decode_command", "proto.decode(MESSAGE_METADATA)",
                                     "sansio.PulsarProtocol.receive_data"])


if __name__ == "__main__":
    sys.exit(main())
