#!/usr/bin/env python3
"""Collect the reliability figures and write docs/reliability.md.

  python soak/report.py faults [--messages N] [--json build/reliability/faults.json]
      run the fault tests (tests/nsq/test_faults.py, test_network_faults.py,
      test_bad_input.py) with pytest and keep what each test recorded
      (record_property: published, acknowledged, duplicates, lost, ...) as JSON.
      --messages runs the server-fault tests at that size (NSQ_FAULT_MESSAGES).
  python soak/report.py faults --pulsar [--json build/reliability/pulsar-faults.json]
      the same for pulsarfast's fault tests against a real Pulsar broker
      (tests/pulsar/test_crash.py: the broker SIGKILLed and restarted on its data).
  python soak/report.py write [--dir build/reliability] [--out docs/reliability.md]
      read every JSON in --dir (written by `faults`, fuzz/fuzz_decoder.py --json,
      fuzz/fuzz_pulsar.py --json and soak/soak.py --json) and write the page.

`make fuzz`, `make soak` and `make reliability` run these in order.
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_DIR = os.path.join(REPO, "build", "reliability")
DEFAULT_OUT = os.path.join(REPO, "docs", "reliability.md")
FAULT_TESTS = ["tests/nsq/test_faults.py", "tests/nsq/test_network_faults.py", "tests/nsq/test_bad_input.py"]
PULSAR_FAULT_TESTS = ["tests/pulsar/test_crash.py"]
#: the "target" of fuzz/fuzz_pulsar.py's JSON (fuzz_decoder.py's has none: the NSQ decoder)
PULSAR_FUZZ_TARGET = "pulsarfast wire decoders"


# -- faults: pytest -> JSON -------------------------------------------------------------------


def parse_junit(path: str) -> list[dict]:
    tests = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        detail = ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, detail = "failed", (child.get("message") or "")[:300]
            elif child.tag == "skipped":
                kind = child.get("type") or ""
                outcome = "xfailed" if "xfail" in kind else "skipped"
                detail = (child.get("message") or "")[:400]
        props = {}
        for prop in case.iter("property"):
            value = prop.get("value")
            try:
                value = json.loads(value)
            except (TypeError, ValueError):
                pass
            props[prop.get("name")] = value
        tests.append({
            "file": (case.get("file") or case.get("classname", "").replace(".", "/") + ".py"),
            "name": case.get("name"), "seconds": float(case.get("time") or 0), "outcome": outcome,
            "detail": detail, "figures": props,
        })
    return tests


def run_faults(args) -> int:
    env = dict(os.environ)
    if args.messages:
        env["NSQ_FAULT_MESSAGES"] = str(args.messages)
        env["NSQ_FAULT_PUBLISHES"] = str(max(1, args.messages * 3 // 5))
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "faults.xml")
        if args.pulsar:
            files = PULSAR_FAULT_TESTS
        else:
            files = FAULT_TESTS[:1] if args.messages else FAULT_TESTS  # only the server faults have a size
        cmd = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider",
               "-o", "junit_family=xunit1", "--junitxml=" + xml]
        print(" ".join(cmd), flush=True)
        code = subprocess.call(cmd, cwd=REPO, env=env)
        if not os.path.exists(xml):
            print("pytest wrote no report (exit %d)" % code, file=sys.stderr)
            return code or 1
        tests = parse_junit(xml)
    figures = {
        "kind": "faults", "target": "pulsar" if args.pulsar else "nsq",
        "finished": datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        "messages": args.messages or None, "pytest_exit": code, "tests": tests,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(figures, f, indent=2)
    print("wrote %s (%d tests, pytest exit %d)" % (args.json, len(tests), code))
    return code


# -- the page ----------------------------------------------------------------------------------


def load(folder: str) -> dict:
    found = {"faults": [], "fuzz": [], "soak": [], "pulsar_faults": [], "pulsar_fuzz": []}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        data["_file"] = os.path.relpath(path, REPO)
        if data.get("kind") == "faults" and data.get("target") == "pulsar":
            found["pulsar_faults"].append(data)
        elif data.get("kind") == "faults":
            found["faults"].append(data)
        elif data.get("kind") == "soak":
            found["soak"].append(data)
        elif "engine" in data and "inputs" in data and data.get("target") == PULSAR_FUZZ_TARGET:
            found["pulsar_fuzz"].append(data)
        elif "engine" in data and "inputs" in data:
            found["fuzz"].append(data)
    return found


def n(value) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return "{:,}".format(value)
    if isinstance(value, float):
        return "{:,.1f}".format(value)
    return str(value)


def table(headers: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(n(c).replace("|", "\\|") for c in row) + " |")
    return lines


def short_name(test: dict) -> str:
    return test["name"].split("[")[0]


def write_page(args) -> int:
    data = load(args.dir)
    lines = [
        "# Reliability",
        "",
        "What nsqfast was put through and what it held. Every figure below comes from a",
        "run on a 2-core machine against real nsqd %s processes on loopback; the page is" % nsqd_version(),
        "generated, do not edit it by hand. To regenerate it:",
        "",
        "```sh",
        "make fuzz      # fuzz/fuzz_decoder.py and fuzz/fuzz_pulsar.py: mutation, atheris and AddressSanitizer runs",
        "make soak      # soak/soak.py: 10,000,000 messages per backend, and the server faults at soak size",
        "make reliability  # soak/report.py faults [--pulsar] (the fault tests) + soak/report.py write (this page)",
        "```",
        "",
        "Generated %s from %s." % (
            datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            ", ".join("`%s`" % d["_file"] for group in data.values() for d in group) or "no runs (nothing found)",
        ),
        "",
    ]
    lost_total = 0
    summary = []

    # -- soak
    soak_runs = [r for d in data["soak"] for r in d["runs"]]
    if soak_runs:
        lost_total += sum(r["lost"] for r in soak_runs)
        summary.append(["Load held", "%s messages published and consumed (%s), RSS growth at most %s MB, "
                        "leftovers after close: %s" % (
                            n(sum(r["distinct"] for r in soak_runs)),
                            ", ".join("%s %s msg/s" % (r["backend"], n(r["messages_per_s"])) for r in soak_runs),
                            n(max(r["rss_growth_mb"] for r in soak_runs)),
                            "none" if not any(r["leftovers"] for r in soak_runs) else "SEE BELOW")])

    # -- faults
    fault_tests = []
    for d in data["faults"]:
        for t in d["tests"]:
            t["run"] = "soak (`make soak`)" if d.get("messages") else "`make test` size"
            fault_tests.append(t)
    with_figures = [t for t in fault_tests if "lost" in t["figures"]]
    lost_total += sum(int(t["figures"]["lost"]) for t in with_figures)
    if fault_tests:
        passed = [t for t in fault_tests if t["outcome"] == "passed"]
        failed = [t for t in fault_tests if t["outcome"] == "failed"]
        xfailed = [t for t in fault_tests if t["outcome"] == "xfailed"]
        summary.append(["Faults survived", "%d of %d fault and bad-input tests passed%s%s" % (
            len(passed), len(passed) + len(failed), ", %d FAILED" % len(failed) if failed else "",
            "; %d known library bugs pinned by strict xfail tests" % len(xfailed) if xfailed else "")])

    # -- fuzz
    if data["fuzz"]:
        total = sum(d["inputs"] for d in data["fuzz"])
        summary.append(["Inputs tried", "%s decoder inputs (%s), compiled and pure compared on each; "
                        "failures (crash, disagreement, non-ProtocolError, memory growth) %d, RSS growth at most %s MB" % (
                            n(total), ", ".join("%s%s %s" % (d["engine"], "+ASan" if d.get("asan") else "",
                                                              n(d["inputs"])) for d in data["fuzz"]),
                            sum(d.get("failures", 0) for d in data["fuzz"]),
                            n(max(d.get("rss_growth_mb", 0) for d in data["fuzz"])))])
    # -- pulsar
    pulsar_tests = [t for d in data["pulsar_faults"] for t in d["tests"]]
    pulsar_crash = [t for t in pulsar_tests if "acknowledged" in t["figures"]]
    lost_total += sum(int(t["figures"].get("lost", 0)) for t in pulsar_crash)
    if pulsar_tests:
        passed = [t for t in pulsar_tests if t["outcome"] == "passed"]
        summary.append(["Pulsar broker crashes", "%d of %d runs passed: %s sends, %s acknowledged, %s reported failed, "
                        "%s acknowledged sends lost" % (
                            len(passed), len(pulsar_tests), n(sum(int(t["figures"].get("sent", 0)) for t in pulsar_crash)),
                            n(sum(int(t["figures"].get("acknowledged", 0)) for t in pulsar_crash)),
                            n(sum(int(t["figures"].get("failed", 0)) for t in pulsar_crash)),
                            n(sum(int(t["figures"].get("lost", 0)) for t in pulsar_crash)))])
    if data["pulsar_fuzz"]:
        summary.append(["Pulsar wire inputs tried", "%s inputs (%s), compiled and pure twins compared on each; "
                        "failures %d, RSS growth at most %s MB" % (
                            n(sum(d["inputs"] for d in data["pulsar_fuzz"])),
                            ", ".join("%s%s %s" % (d["engine"], "+ASan" if d.get("asan") else "", n(d["inputs"]))
                                      for d in data["pulsar_fuzz"]),
                            sum(d.get("failures", 0) for d in data["pulsar_fuzz"]),
                            n(max(d.get("rss_growth_mb", 0) for d in data["pulsar_fuzz"])))])
    summary.append(["Messages lost", "**%d**" % lost_total])
    lines += ["## Summary", ""] + table(["", ""], summary) + [""]

    # -- server faults
    server = [t for t in with_figures if "test_faults" in t["file"]]
    if server:
        lines += ["## Server faults", "", "Real nsqd stopped, killed and restarted on the same port and data",
                  "directory while a Reader consumes or a Writer publishes (`tests/nsq/test_faults.py`).", ""]
        rows = []
        for t in server:
            f = t["figures"]
            rows.append([f.get("fault"), t["run"], f.get("published"), f.get("handled", f.get("acknowledged")),
                         f.get("duplicates", "-"), f.get("errors", "-"), f.get("lost"), t["outcome"], "%.1fs" % t["seconds"]])
        lines += table(["fault", "run", "published", "handled / acknowledged", "duplicates", "publish errors", "lost",
                        "result", "time"], rows)
        lines += ["", "Duplicates are deliveries of a message already handled (at-least-once delivery: the",
                  "message was in flight when nsqd went away); publish errors are publishes answered with",
                  "an error (the connection died under them): no publish went unanswered. After a",
                  "SIGKILL nsqd re-reads its disk queue from the last persisted position; the tests keep",
                  "that position from being persisted mid-test (`--sync-every`, `--sync-timeout`) because",
                  "nsqd itself drops in-flight messages whose read was persisted before the kill.", ""]

    network = [t for t in with_figures if "test_network_faults" in t["file"]]
    if network:
        lines += ["## Network faults", "", "Through `tests/support/faultproxy.py` between the clients and nsqd, heartbeat",
                  "interval 1 s (`tests/nsq/test_network_faults.py`).", ""]
        rows = []
        for t in network:
            f = t["figures"]
            rows.append([f.get("fault"), f.get("published"), f.get("acknowledged"), f.get("errors"),
                         f.get("consumed"), f.get("duplicates"), f.get("lost"), t["outcome"], "%.1fs" % t["seconds"]])
        lines += table(["fault", "published", "acknowledged", "publish errors", "consumed", "duplicates", "lost",
                        "result", "time"], rows)
        lines += [""]

    hostile = [t for t in fault_tests if "test_bad_input" in t["file"] and "peak_bytes" in t["figures"]]
    if hostile:
        lines += ["## A server that sends garbage", "", "Bytes injected into a Reader's connection by the proxy;",
                  "the connection must end with a clear error, the Reader reconnect and go on consuming,",
                  "and the client never allocate what a length prefix claims (peak traced by tracemalloc).", ""]
        rows = [[t["figures"].get("fault"), t["figures"].get("error"), t["figures"].get("peak_bytes"),
                 t["figures"].get("lost"), t["outcome"]] for t in hostile]
        lines += table(["garbage", "error", "peak Python memory (bytes)", "lost", "result"], rows) + [""]

    mistakes = [t for t in fault_tests if "test_bad_input" in t["file"] and "peak_bytes" not in t["figures"]]
    if mistakes:
        lines += ["## User mistakes", "", "Refused with an nsq.Error that is also a ValueError or TypeError before a byte",
                  "reaches the wire (the proxy counts bytes; nsqd keeps the connection and its counts).", ""]
        rows = [[t["name"], t["outcome"], t["detail"].replace("\n", " ")[:160] if t["outcome"] != "passed" else ""]
                for t in mistakes]
        lines += table(["test", "result", "note"], rows) + [""]

    xfailed = [t for t in fault_tests if t["outcome"] == "xfailed"]
    if xfailed:
        lines += ["## Known library bugs", "", "Pinned by strict xfail tests: they fail today and will fail the",
                  "suite once fixed, until the marker is removed.", ""]
        seen = set()
        for t in xfailed:
            key = short_name(t)
            if key in seen:
                continue
            seen.add(key)
            reason = t["detail"].split(" - ", 1)[-1] if " - " in t["detail"] else t["detail"]
            lines.append("- `%s`: %s" % (key, reason.replace("reason: ", "")))
        lines.append("")

    # -- fuzz
    if data["fuzz"]:
        lines += ["## Decoder fuzzing", "", "`fuzz/fuzz_decoder.py` feeds each input, cut into chunks, to the compiled",
                  "decoder and to its pure-Python twin, and fails on any exception other than",
                  "ProtocolError, any disagreement between them (frames, error text, buffered bytes),",
                  "a crash, or resident memory growing over the run.", ""]
        rows = []
        for d in data["fuzz"]:
            rows.append([d["engine"] + (" + ASan" if d.get("asan") else ""), d["inputs"], "%s/s" % n(d.get("rate_per_s")),
                         "%ss" % n(d.get("seconds")), d.get("distinct_outcomes", "-"),
                         "%s -> %s" % (n(d.get("rss_start_kb")), n(d.get("rss_end_kb"))), d.get("failures", 0)])
        lines += table(["engine", "inputs", "rate", "time", "distinct outcomes", "RSS kB (after warm-up -> end)",
                        "failures"], rows)
        selftests = sorted({d["asan_selftest"] for d in data["fuzz"] if d.get("asan_selftest")})
        lines += ["", "ASan runs use the compiled decoder rebuilt with `gcc -fsanitize=address` "
                  "(`fuzz/build_asan.py`), libasan preloaded and `PYTHONMALLOC=malloc`."]
        if selftests:
            lines += ["Before each ASan run a copy with a deliberate bug must be caught: %s." % "; ".join(selftests)]
        lines += [""]

    # -- pulsar: broker crashes and wire fuzzing
    if pulsar_tests:
        lines += ["## Pulsar broker crashes", "", "A real Pulsar standalone broker SIGKILLed while a pulsarfast producer",
                  "streams with send_async, then started again on the same data dir (bookie journal and",
                  "ledgers, RocksDB metadata store), ports and config; the client reconnects by itself",
                  "(`tests/pulsar/test_crash.py`). Every send must get exactly one outcome, and every",
                  "acknowledged one must be consumed from the durable subscription made before the stream.", ""]
        rows = []
        for t in pulsar_tests:
            f = t["figures"]
            rows.append([f.get("fault", short_name(t)), f.get("sent"), f.get("acknowledged"),
                         f.get("acknowledged_before_crash"), f.get("failed"), f.get("consumed"), f.get("duplicates"),
                         f.get("lost"), "%ss" % n(f.get("restart_seconds")), t["outcome"], "%.1fs" % t["seconds"]])
        lines += table(["fault", "sent", "acknowledged", "of them before the kill", "reported failed", "consumed",
                        "duplicates", "acknowledged but lost", "broker restart", "result", "time"], rows)
        lines += ["", "Duplicates are redeliveries: acknowledgements in flight at the kill die with the broker.", ""]
    if data["pulsar_fuzz"]:
        lines += ["## Pulsar wire fuzzing", "", "`fuzz/fuzz_pulsar.py` builds frames with pulsarfast's own encoders,",
                  "mutates them (also re-framed with a correct size and crc32c, to reach what lies behind the",
                  "checksum), cuts the stream into chunks and feeds it to the compiled `pulsarfast.wire._codec` and",
                  "its pure twin `_wire_py`: the frame decoder, `decode_message`, `split_batch` and",
                  "`split_batch_decoded`; then the generic command decoder and the sansio receiving path.",
                  "It fails on any exception but ProtocolError, any disagreement between the twins (result",
                  "or error class), a crash, or resident memory growing over the run.", ""]
        rows = []
        for d in data["pulsar_fuzz"]:
            rows.append([d["engine"] + (" + ASan" if d.get("asan") else ""), d["inputs"], "%s/s" % n(d.get("rate_per_s")),
                         "%ss" % n(d.get("seconds")), d.get("distinct_outcomes", "-"),
                         "%s -> %s" % (n(d.get("rss_start_kb")), n(d.get("rss_end_kb"))), d.get("failures", 0)])
        lines += table(["engine", "inputs", "rate", "time", "distinct outcomes", "RSS kB (after warm-up -> end)",
                        "failures"], rows)
        selftests = sorted({d["asan_selftest"] for d in data["pulsar_fuzz"] if d.get("asan_selftest")})
        if selftests:
            lines += ["", "Before the ASan run a copy with a deliberate bug must be caught: %s." % "; ".join(selftests)]
        lines += [""]

    # -- soak
    if soak_runs:
        lines += ["## Long runs", "", "`soak/soak.py`: one process publishes (Writer) and consumes (Reader) through",
                  "one nsqd; VmRSS is sampled every second; OS threads, Python threads, live",
                  "greenlets, file descriptors and sockets are counted before the clients exist and",
                  "after they are closed.", ""]
        rows = []
        for r in soak_runs:
            rows.append([r["backend"], r["messages"], r["publish"], "%ss" % n(r["seconds"]), r["messages_per_s"],
                         r["duplicates"], r["lost"], "%s / %s / %s" % (n(r["rss_kb"]["after_warmup"]), n(r["rss_kb"]["peak"]),
                                                                       n(r["rss_kb"]["end"])),
                         r["rss_growth_mb"], ", ".join("%s %s" % kv for kv in r["leftovers"].items()) or "none",
                         "passed" if r["passed"] else "FAILED"])
        lines += table(["backend", "messages", "publishing", "time", "msg/s", "duplicates", "lost",
                        "RSS kB warm / peak / end", "RSS growth MB", "left after close", "result"], rows)
        lines += [""]
        for r in soak_runs:
            samples = r.get("rss_samples") or []
            if len(samples) > 2:
                lines.append("RSS over the %s run (kB): %s" % (r["backend"], sparkline([s[1] for s in samples])))
        lines += [""]

    text = "\n".join(lines).rstrip() + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print("wrote %s" % args.out)
    return 0


def sparkline(values: list[int], width: int = 48) -> str:
    blocks = "▁▂▃▄▅▆▇█"
    if len(values) > width:  # the mean of each of `width` slices
        values = [sum(part) // len(part) for part in
                  (values[i * len(values) // width:(i + 1) * len(values) // width] for i in range(width)) if part]
    lo, hi = min(values), max(values)
    span = max(hi - lo, 1)
    return "`%s` (%s to %s)" % ("".join(blocks[min(7, (v - lo) * 8 // span)] for v in values), n(lo), n(hi))


def nsqd_version() -> str:
    try:
        sys.path.insert(0, REPO)
        from tests.support.servers import nsq_binary

        out = subprocess.run([nsq_binary("nsqd"), "--version"], capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).split()[1].lstrip("v")
    except Exception:  # noqa: BLE001 - only a label
        return ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    faults = sub.add_parser("faults", help="run the fault tests and keep their figures as JSON")
    faults.add_argument("--messages", type=int, default=0, help="server-fault tests at this size (soak)")
    faults.add_argument("--pulsar", action="store_true", help="pulsarfast's fault tests against a real Pulsar broker")
    faults.add_argument("--json", default=None, help="default build/reliability/faults.json (pulsar-faults.json)")
    write = sub.add_parser("write", help="write docs/reliability.md from the JSON files")
    write.add_argument("--dir", default=DEFAULT_DIR)
    write.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.command == "faults":
        if args.json is None:
            args.json = os.path.join(DEFAULT_DIR, "pulsar-faults.json" if args.pulsar else "faults.json")
        return run_faults(args)
    if args.command is None:
        args = parser.parse_args(["write"] + (argv or sys.argv[1:]))
    return write_page(args)


if __name__ == "__main__":
    sys.exit(main())
