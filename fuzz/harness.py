"""What the two decoder fuzzers (fuzz_decoder.py for NSQ, fuzz_pulsar.py for
Pulsar) share: cutting an input into chunks, resident memory, saving a failing input, the coverage-guided
atheris engine around a fuzzer's own ``check`` (run in a child), and the figures' JSON. Each fuzzer keeps what is its
own: the seeds, the mutations, what one input is checked for."""
from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
from typing import Callable, Iterable


def chunks_of(head: bytes, stream: bytes, byte_at_a_time_up_to: int) -> list:
    """The stream cut into the chunks a socket might deliver, as the input's header bytes say:
    whole, a byte at a time (streams up to byte_at_a_time_up_to bytes), fixed sizes, or a
    repeating pattern with empty chunks; each chunk bytes, bytearray or a memoryview of either."""
    mode = head[1] & 3
    if mode == 0:
        cuts = [len(stream)]
    elif mode == 1 and len(stream) <= byte_at_a_time_up_to:
        cuts = [1] * len(stream)  # byte at a time
    elif mode == 2 or mode == 1:
        size = head[2] % 64 + 1
        cuts = [size] * (len(stream) // size + 1)
    else:
        pattern = [b % 97 for b in head[3:7]]  # 0: an empty chunk
        if not any(pattern):
            pattern = [1]
        cuts = []
        total = 0
        i = 0
        while total < len(stream):
            cuts.append(pattern[i % len(pattern)])
            total += pattern[i % len(pattern)]
            i += 1
    kind = (head[1] >> 2) & 3
    chunks = []
    pos = 0
    for size in cuts:
        piece = stream[pos : pos + size]
        pos += size
        if kind == 1:
            piece = bytearray(piece)
        elif kind == 2:
            piece = memoryview(piece)
        elif kind == 3:
            piece = memoryview(bytearray(piece))
        chunks.append(piece)
        if pos >= len(stream):
            break
    return chunks


def rss_kb() -> int:
    """This process's resident memory, in kB (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def save_crash(work: str, data: bytes) -> str:
    """Keep a failing input under work/crashes/, named by its hash; returns the path."""
    folder = os.path.join(work, "crashes")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "crash-" + hashlib.sha1(data).hexdigest()[:16])
    with open(path, "wb") as f:
        f.write(data)
    return path


def run_atheris(runs: int, seed: int, *, work: str, max_len: int, instrument: Callable[[], None],
                setup: Callable[[], None], check: Callable[[bytes], object], mismatch: type,
                seeds: Callable[[random.Random], Iterable[bytes]], warmup_cap: int) -> dict:
    """atheris (libFuzzer) over check(): instrument() imports the pure decoders under atheris'
    instrumentation, seeds(rng) fills the corpus. libFuzzer exits the process after the last run,
    so the figures go to $FUZZ_ATHERIS_REPORT from inside the last call."""
    try:
        import atheris
    except ImportError as exc:
        raise SystemExit("atheris is not installed (pip install atheris): %s" % exc)
    with atheris.instrument_imports():
        instrument()
    setup()
    state = {"n": 0, "rss_start": None, "started": time.monotonic()}
    warmup = min(warmup_cap, runs // 10)
    report_path = os.environ.get("FUZZ_ATHERIS_REPORT")

    def one(data: bytes) -> None:
        state["n"] += 1
        if state["n"] == warmup:
            state["rss_start"] = rss_kb()
        try:
            check(data)
        except mismatch:
            print("FAILING INPUT saved to %s" % save_crash(work, data), file=sys.stderr)
            raise
        if state["n"] == runs and report_path:
            elapsed = time.monotonic() - state["started"]
            with open(report_path, "w") as f:
                json.dump({"inputs": state["n"], "seconds": round(elapsed, 1),
                           "rate_per_s": round(state["n"] / max(elapsed, 1e-9)),
                           "rss_start_kb": state["rss_start"] or rss_kb(), "rss_end_kb": rss_kb()}, f)

    corpus_dir = os.path.join(work, "corpus")
    os.makedirs(corpus_dir, exist_ok=True)
    for i, data in enumerate(seeds(random.Random(seed))):
        path = os.path.join(corpus_dir, "seed-%03d" % i)
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(data)
    argv = [sys.argv[0], "-runs=%d" % runs, "-seed=%d" % (seed or 1), "-max_len=%d" % max_len,
            "-rss_limit_mb=4096", "-print_final_stats=1",
            "-artifact_prefix=%s/" % os.path.join(work, "crashes"), corpus_dir]
    os.makedirs(os.path.join(work, "crashes"), exist_ok=True)
    atheris.Setup(argv, one)
    atheris.Fuzz()  # exits the process
    return {}


def atheris_in_child(script: str, work: str, child_flag: str, runs: int, seed: int) -> dict | None:
    """Run script's atheris engine in a child process (libFuzzer ends the process it runs in),
    with child_flag set in its environment; its figures, or None when it failed."""
    os.makedirs(work, exist_ok=True)
    report = os.path.join(work, "atheris-report-%d.json" % os.getpid())
    env = dict(os.environ, FUZZ_ATHERIS_REPORT=report, **{child_flag: "1"})
    started = time.monotonic()
    code = subprocess.call([sys.executable, os.path.abspath(script), "--engine", "atheris",
                            "--runs", str(runs), "--seed", str(seed)], env=env)
    figures = {"inputs": runs, "seconds": round(time.monotonic() - started, 1)}
    if os.path.exists(report):
        with open(report) as f:
            figures.update(json.load(f))
        os.remove(report)
    if code != 0:
        print("atheris run FAILED (exit %d)" % code, file=sys.stderr)
        return None
    return figures


def finish(args, figures: dict, compiled_path: str, **described: object) -> int:
    """Check the run's memory growth against args.max_rss_growth_mb, complete the figures (engine,
    seed, ASan, what was fuzzed: ``described``), print them and write them to args.json;
    the exit code."""
    if args.max_rss_growth_mb is None:
        args.max_rss_growth_mb = 128.0 if os.environ.get("NSQ_FUZZ_ASAN") else 32.0
    if os.environ.get("NSQ_FUZZ_ASAN_SELFTEST"):
        figures["asan_selftest"] = os.environ["NSQ_FUZZ_ASAN_SELFTEST"]
    growth_mb = (figures.get("rss_end_kb", 0) - figures.get("rss_start_kb", 0)) / 1024.0
    figures.update(engine=args.engine, asan=bool(os.environ.get("NSQ_FUZZ_ASAN")), seed=args.seed)
    figures.update(described)
    figures.update(
        compiled_module=compiled_path, rss_growth_mb=round(growth_mb, 1), max_rss_growth_mb=args.max_rss_growth_mb,
        failures=0, python=sys.version.split()[0], finished=time.strftime("%Y-%m-%d %H:%M:%S"),
    )
    ok = growth_mb <= args.max_rss_growth_mb
    if not ok:
        figures["failures"] = 1
        print("FAILED: resident memory grew by %.1f MB (limit %.1f)" % (growth_mb, args.max_rss_growth_mb),
              file=sys.stderr)
    print(json.dumps(figures, indent=2))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0 if ok else 1
