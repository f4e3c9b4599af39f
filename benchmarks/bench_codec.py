# Benchmark of the frame decoder: compiled nsq._frame vs the pure-Python twin on a
# stream of 200,000 message frames (100-byte bodies) fed in 64 KiB chunks.
from __future__ import annotations

import argparse
import json
import os
import platform
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nsq import codec  # noqa: E402

FRAMES = 200_000
BODY_SIZE = 100
CHUNK = 64 * 1024
REPEATS = 5
TARGET = 5.0


def build_chunks(frames: int = FRAMES, body_size: int = BODY_SIZE, chunk: int = CHUNK) -> list[bytes]:
    body = bytes(range(body_size % 256)) * (body_size // 256) + bytes(range(body_size % 256))
    frame_parts = []
    for i in range(frames):
        message_id = b"%016x" % i
        data = struct.pack(">qH16s", 1_700_000_000_000_000_000 + i, 1 + i % 5, message_id) + body
        frame_parts.append(struct.pack(">II", 4 + len(data), codec.FRAME_TYPE_MESSAGE) + data)
    stream = b"".join(frame_parts)
    return [stream[i : i + chunk] for i in range(0, len(stream), chunk)]


def run_once(impl, chunks: list[bytes], expected: int) -> float:
    decoder = impl.FrameDecoder()
    feed = decoder.feed
    count = 0
    start = time.perf_counter()
    for piece in chunks:
        count += len(feed(piece))
    elapsed = time.perf_counter() - start
    if count != expected or decoder.buffered:
        raise SystemExit("decoder returned %d frames, expected %d" % (count, expected))
    return elapsed


def frames_per_second(impls: dict, chunks: list[bytes], expected: int, repeats: int) -> dict:
    """Best-of-repeats frames/s per implementation; runs are interleaved so that
    a burst of load on the machine hits both implementations alike."""
    best = {name: float("inf") for name in impls}
    for _ in range(repeats):
        for name, impl in impls.items():
            best[name] = min(best[name], run_once(impl, chunks, expected))
    return {name: expected / seconds for name, seconds in best.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    parser.add_argument("--frames", type=int, default=FRAMES)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument(
        "--min-ratio", type=float, default=None,
        help="exit with status 1 if the compiled codec is missing or slower than this ratio",
    )
    args = parser.parse_args(argv)

    chunks = build_chunks(args.frames)
    results: dict[str, object] = {
        "frames": args.frames,
        "body_size": BODY_SIZE,
        "chunk_size": CHUNK,
        "repeats": args.repeats,
        "python": platform.python_version(),
    }
    impls = {"pure": codec.python_impl}
    if codec.compiled_impl is not None:
        impls["compiled"] = codec.compiled_impl
    rates = frames_per_second(impls, chunks, args.frames, args.repeats)
    pure, compiled = rates["pure"], rates.get("compiled")
    results["pure_frames_per_s"] = pure
    results["compiled_frames_per_s"] = compiled
    results["ratio"] = compiled / pure if compiled else None

    print("frames: %d x %d-byte bodies in %d KiB chunks, best of %d"
          % (args.frames, BODY_SIZE, CHUNK // 1024, args.repeats))
    print("pure python: %12.0f frames/s" % pure)
    if compiled is None:
        print("compiled:    not available (%s)" % codec.compiled_import_error)
        print("ratio compiled/pure: n/a (target >= %gx)" % TARGET)
    else:
        print("compiled:    %12.0f frames/s" % compiled)
        print("ratio compiled/pure: %.1fx (target >= %gx)" % (compiled / pure, TARGET))

    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
            fh.write("\n")
    if args.min_ratio is not None and (compiled is None or compiled / pure < args.min_ratio):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
