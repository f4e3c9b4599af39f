#!/usr/bin/env python3
"""Differential fuzzer for the NSQ frame decoder: compiled (nsq._frame) vs pure (nsq._frame_py).

Every input is fed, cut into chunks, to both FrameDecoder implementations. It
fails (exit 1, the input saved under fuzz/crashes/) when

* either implementation raises anything but ProtocolError,
* the two disagree on any feed() (frames, error type and text, ``buffered``),
* the process dies (a crash in the compiled code, or AddressSanitizer),
* resident memory grows by more than --max-rss-growth-mb over the run.

Engines:
  mutate   hand-rolled mutation fuzzer: seeds of valid and near-valid streams,
           mutated (bit flips, interesting sizes and frame types, splices,
           truncations); inputs with a new outcome join the corpus. No deps.
  atheris  coverage-guided libFuzzer (pip install atheris); coverage comes from
           the instrumented pure twin, the compiled module is compared on
           every input.

Usage:
  python fuzz/fuzz_decoder.py --engine mutate --runs 10000000 --json build/reliability/fuzz-mutate.json
  python fuzz/fuzz_decoder.py --engine atheris --runs 2000000
  python fuzz/fuzz_decoder.py --asan --runs 1000000     # compiled decoder built with -fsanitize=address

An input's layout: byte 0 picks max_frame_size, byte 1 the chunking and the
buffer type, byte 2 a chunk size, bytes 3..6 a chunk-size pattern; the rest is
the stream. So any byte string is a valid input, for either engine.
"""
from __future__ import annotations

import argparse
import os
import random
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path and not os.environ.get("NSQ_FUZZ_ASAN"):
    sys.path.insert(0, REPO)  # (in ASan mode PYTHONPATH points at the ASan build's copy of the package)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import harness  # noqa: E402 - fuzz/harness.py, beside this file

#: Where runs keep their working files (gitignored): the atheris corpus, failing inputs.
WORK = os.environ.get("NSQ_FUZZ_WORK") or os.path.join(REPO, "build", "fuzz")

HEADER = 7
MAX_FRAME_SIZES = (30, 31, 64, 256, 4096, 16 * 1024 * 1024, 2**32 - 1, 2**40)
MAX_STREAM = 4096  # longer inputs are cut: keeps each run short and the rate high


def _impls():
    from nsq import codec

    if codec.compiled_impl is None:
        raise SystemExit("the compiled decoder is not importable: %s" % codec.compiled_import_error)
    return codec.python_impl, codec.compiled_impl


PY, CY = None, None
ProtocolError = None


def setup() -> None:
    global PY, CY, ProtocolError
    PY, CY = _impls()
    from nsq.errors import ProtocolError as PE

    ProtocolError = PE


class Mismatch(AssertionError):
    pass


def split(data: bytes) -> tuple[int, list]:
    """An input -> (max_frame_size, chunks)."""
    head = data[:HEADER].ljust(HEADER, b"\0")
    stream = data[HEADER : HEADER + MAX_STREAM]
    max_frame_size = MAX_FRAME_SIZES[head[0] % len(MAX_FRAME_SIZES)]
    chunks = harness.chunks_of(head, stream, 256)
    return max_frame_size, chunks


def _outcomes(impl, max_frame_size: int, chunks: list) -> list:
    decoder = impl.FrameDecoder(max_frame_size)
    out = []
    for chunk in chunks:
        try:
            result = ("ok", decoder.feed(chunk))
        except ProtocolError as exc:
            result = ("error", type(exc).__name__, str(exc))
        except Exception as exc:  # noqa: BLE001 - anything else is the bug we look for
            raise Mismatch("%s raised %s: %s" % (impl.__name__, type(exc).__name__, exc)) from exc
        out.append((result, decoder.buffered))
        if result[0] == "error":
            try:  # a poisoned decoder must stay poisoned
                decoder.feed(b"\0\0\0\x08\0\0\0\0OK")
            except ProtocolError as exc:
                out.append((("poisoned", str(exc)), decoder.buffered))
            else:
                raise Mismatch("%s accepted data after a ProtocolError" % impl.__name__)
            break
    return out


def _decode_message(impl, payload: bytes):
    try:
        return ("ok", impl.decode_message(payload))
    except ProtocolError as exc:
        return ("error", str(exc))
    except Exception as exc:  # noqa: BLE001
        raise Mismatch("%s.decode_message raised %s: %s" % (impl.__name__, type(exc).__name__, exc)) from exc


def check(data: bytes) -> tuple:
    """Run one input through both implementations; returns an outcome signature.

    Raises Mismatch when they disagree or raise anything but ProtocolError."""
    max_frame_size, chunks = split(data)
    expected = _outcomes(PY, max_frame_size, chunks)
    got = _outcomes(CY, max_frame_size, chunks)
    if got != expected:
        raise Mismatch("compiled and pure decoders disagree:\n  pure:     %r\n  compiled: %r" % (expected[:6], got[:6]))
    payload = data[HEADER : HEADER + 64]
    if _decode_message(PY, payload) != _decode_message(CY, payload):
        raise Mismatch("decode_message disagrees on %r" % (payload,))
    # signature: how it ended and roughly what came out (the mutate engine's "coverage")
    last = expected[-1][0] if expected else ("none",)
    ending = last[0] if last[0] != "error" else "error:" + last[2].split(" ")[0] + ":" + last[2][-12:]
    frames = sum(len(r[0][1]) for r in expected if r[0][0] == "ok")
    kinds = frozenset(f[0] for r in expected if r[0][0] == "ok" for f in r[0][1])
    return (ending, min(frames, 4), kinds, max_frame_size, len(chunks) > 1, expected[-1][1] > 0 if expected else False)


# -- seeds ---------------------------------------------------------------------------------


def frame(frame_type: int, data: bytes) -> bytes:
    return struct.pack(">II", 4 + len(data), frame_type) + data


def message(ts: int, attempts: int, mid: bytes, body: bytes) -> bytes:
    return frame(2, struct.pack(">qH16s", ts, attempts, mid) + body)


def seed_streams(rng: random.Random) -> list[bytes]:
    """Valid streams and near misses, each behind a random 7-byte input header."""
    frames = [
        frame(0, b"OK"), frame(0, b"_heartbeat_"), frame(0, b"CLOSE_WAIT"),
        frame(0, b'{"max_rdy_count":2500,"version":"1.3.0","msg_timeout":60000}'),
        frame(1, b"E_INVALID invalid command"), frame(1, b"E_FIN_FAILED FIN 0123456789abcdef failed"),
        message(1_700_000_000_000_000_000, 1, b"0123456789abcdef", b"hello"),
        message(-1, 65535, b"\xff" * 16, b""), message(0, 0, b"\0" * 16, bytes(range(256))),
        frame(0, b""), struct.pack(">II", 4 + 26, 2) + b"\0" * 26,
    ]
    seeds = []
    for _ in range(64):
        stream = b"".join(rng.choice(frames) for _ in range(rng.randint(1, 6)))
        seeds.append(bytes(rng.getrandbits(8) for _ in range(HEADER)) + stream)
    for size, ftype in ((0, 0), (3, 0), (4, 0), (29, 2), (30, 2), (2**31, 2), (2**32 - 1, 0), (8, 3), (8, 2**32 - 1)):
        seeds.append(bytes(HEADER) + struct.pack(">II", size, ftype) + b"\0" * 32)
    return seeds


INTERESTING_U32 = (0, 1, 3, 4, 5, 8, 29, 30, 31, 34, 255, 256, 4096, 16 * 1024 * 1024, 16 * 1024 * 1024 + 1,
                   2**31 - 1, 2**31, 2**32 - 1)


def mutate(data: bytes, rng: random.Random, corpus: list) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        n = len(buf)
        at = rng.randrange(n + 1)
        if op == 0 and n:
            buf[at % n] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[at % n] = rng.randrange(256)
        elif op == 2:  # an interesting frame size or type, anywhere
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
        elif op == 8:  # new chunking only
            buf[0:HEADER] = bytes(rng.getrandbits(8) for _ in range(HEADER))
    return bytes(buf[: HEADER + MAX_STREAM])


# -- memory --------------------------------------------------------------------------------


def rss_kb() -> int:
    return harness.rss_kb()


def save_crash(data: bytes) -> str:
    return harness.save_crash(WORK, data)


# -- engines -------------------------------------------------------------------------------


def run_mutate(runs: int, seed: int, progress: float = 10.0, corpus_limit: int = 4096) -> dict:
    rng = random.Random(seed)
    corpus = seed_streams(rng)
    signatures = set()
    for data in corpus:
        signatures.add(check(data))
    started = time.monotonic()
    last = started
    rss_start = None
    warmup = min(200_000, runs // 10)
    executed = 0
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
        if sig not in signatures:
            signatures.add(sig)
            if len(corpus) < corpus_limit:
                corpus.append(data)
            else:
                corpus[rng.randrange(len(corpus))] = data
        if progress and i & 0x3FFF == 0:
            now = time.monotonic()
            if now - last >= progress:
                last = now
                print("  %d inputs, %.0f/s, %d outcomes, corpus %d, rss %d kB"
                      % (i, i / (now - started), len(signatures), len(corpus), rss_kb()), flush=True)
    elapsed = time.monotonic() - started
    return {
        "inputs": executed, "seconds": round(elapsed, 1), "rate_per_s": round(executed / max(elapsed, 1e-9)),
        "distinct_outcomes": len(signatures), "corpus": len(corpus),
        "rss_start_kb": rss_start if rss_start is not None else rss_kb(), "rss_end_kb": rss_kb(),
    }


def _instrumented() -> None:
    import nsq._frame_py  # noqa: F401 - instrumented for coverage


def run_atheris(runs: int, seed: int) -> dict:
    return harness.run_atheris(runs, seed, work=WORK, max_len=HEADER + MAX_STREAM, instrument=_instrumented,
                               setup=setup, check=check, mismatch=Mismatch, seeds=seed_streams, warmup_cap=200_000)


# -- AddressSanitizer build ------------------------------------------------------------------


def asan_env(build_dir: str) -> dict:
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not libasan or not os.path.exists(libasan):
        raise SystemExit("gcc's libasan.so was not found (install gcc with AddressSanitizer support)")
    env = dict(os.environ)
    env.update(
        LD_PRELOAD=libasan,
        # Python itself is not built with ASan: no leak report for the interpreter's
        # own allocations; abort on the first error so that the run fails.
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:quarantine_size_mb=64",
        PYTHONMALLOC="malloc",  # every allocation through malloc, so ASan sees its bounds
        PYTHONPATH=build_dir + os.pathsep + env.get("PYTHONPATH", ""),
        NSQ_FUZZ_ASAN="1",
    )
    return env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("mutate", "atheris"), default="mutate")
    parser.add_argument("--runs", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the run's figures here")
    parser.add_argument("--max-rss-growth-mb", type=float, default=None,
                        help="fail when resident memory grows more over the run (default 32, or 128 under ASan, "
                        "whose quarantine of freed memory is capped at 64 MB)")
    parser.add_argument("--asan", action="store_true", help="build the compiled decoder with ASan and run under it")
    args = parser.parse_args(argv)

    if args.asan and not os.environ.get("NSQ_FUZZ_ASAN"):
        sys.path.insert(0, HERE)
        import build_asan

        print("ASan selftest: a build with a seeded overflow must be stopped ...", flush=True)
        selftest = build_asan.selftest(asan_env)
        print("  " + selftest["asan_selftest"], flush=True)
        build_dir = build_asan.build()
        cmd = [sys.executable, os.path.abspath(__file__), "--engine", args.engine, "--runs", str(args.runs),
               "--seed", str(args.seed)]
        if args.max_rss_growth_mb is not None:
            cmd += ["--max-rss-growth-mb", str(args.max_rss_growth_mb)]
        if args.json:
            cmd += ["--json", args.json]
        print("running under AddressSanitizer: %s" % " ".join(cmd), flush=True)
        env = asan_env(build_dir)
        env["NSQ_FUZZ_ASAN_SELFTEST"] = selftest["asan_selftest"]
        return subprocess.call(cmd, env=env)

    if args.engine == "atheris" and os.environ.get("NSQ_FUZZ_CHILD"):
        run_atheris(args.runs, args.seed)  # does not return: libFuzzer exits the process
        return 0

    setup()
    compiled_path = CY.__file__
    if os.environ.get("NSQ_FUZZ_ASAN") and "nsq-asan" not in compiled_path:
        raise SystemExit("ASan mode but the compiled decoder came from %s" % compiled_path)
    print("fuzzing %s (compiled: %s) with %s, %d inputs, seed %d"
          % (PY.__name__, compiled_path, args.engine, args.runs, args.seed), flush=True)

    if args.engine == "atheris":
        figures = harness.atheris_in_child(__file__, WORK, "NSQ_FUZZ_CHILD", args.runs, args.seed)
        return 1 if figures is None else finish(args, figures, compiled_path)

    try:
        figures = run_mutate(args.runs, args.seed)
    except Mismatch as exc:
        print("FAILED: %s" % exc, file=sys.stderr)
        return 1
    return finish(args, figures, compiled_path)


def finish(args, figures: dict, compiled_path: str) -> int:
    return harness.finish(args, figures, compiled_path, implementations=["nsq._frame_py (pure)", "nsq._frame (compiled)"])


if __name__ == "__main__":
    sys.exit(main())
