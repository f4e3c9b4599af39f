#!/usr/bin/env python3
# Puts the latest benchmark tables (benchmarks/results/latest.md, spark.json, pulsar_quick.json) and chart
# into README.md, between the markers <!-- bench:start --> and <!-- bench:end -->.
# Run by `make bench` after benchmarks/run.py. Without the markers the section
# is appended at the end of README.md; without README.md nothing is written.
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
START = "<!-- bench:start -->"
END = "<!-- bench:end -->"


def spark_section(results_dir: str) -> str | None:
    """The nsq.spark figures written by benchmarks/bench_spark.py, if any."""
    path = os.path.join(results_dir, "spark.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    sink, source = data["sink"], data["source"]
    return "\n".join(
        [
            "#### Spark (nsq.spark, `%s`, PySpark %s)" % (data["master"], data["pyspark"]),
            "",
            "| direction | what | rate |",
            "|---|---|---:|",
            "| sink | `df.write.format(\"nsq\")`, %s rows | %s rows/s |"
            % (format(sink.get("rows", 0), ","), format(sink.get("rows_per_s", 0), ",")),
            "| source | `readStream.format(\"nsq\")`, availableNow, %s messages | %s msgs/s |"
            % (format(source.get("messages", 0), ","), format(source.get("messages_per_s", 0), ",")),
        ]
    )


def pulsar_section(results_dir: str) -> str | None:
    """pulsarfast beside the official client, written by benchmarks/pulsar_quick.py, if any."""
    path = os.path.join(results_dir, "pulsar_quick.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    table = data["markdown"]
    cut = table.find("\n\nProfile of ")
    if cut >= 0:  # (the profiles of missed targets stay in the JSON and docs/pulsar.md)
        table = table[:cut] + ("\n\nA missed target's profile: `benchmarks/results/pulsar_quick.json` "
                               "(`markdown`), discussed in [docs/pulsar.md](docs/pulsar.md#speed).")
    return "#### Pulsar (pulsarfast beside the official client, `make bench-pulsar`)\n\n" + table


def section(results_dir: str, readme_dir: str) -> str:
    with open(os.path.join(results_dir, "latest.md")) as f:
        body = f.read().strip()
    parts = [START, body]
    spark = spark_section(results_dir)
    if spark:
        parts.append(spark)
    pulsar = pulsar_section(results_dir)
    if pulsar:
        parts.append(pulsar)
    png = os.path.join(results_dir, "latest.png")
    if os.path.exists(png):
        rel = os.path.relpath(png, readme_dir).replace(os.sep, "/")
        parts.append("![benchmark chart](%s)" % rel)
    parts.append(END)
    return "\n\n".join(parts)


def replace(text: str, new: str) -> str:
    start = text.find(START)
    end = text.find(END, start + len(START)) if start >= 0 else -1
    if start >= 0 and end >= 0:
        return text[:start] + new + text[end + len(END):]
    if start >= 0 or text.find(END) >= 0:
        raise SystemExit("README has only one of %s / %s: fix it by hand" % (START, END))
    return text.rstrip("\n") + "\n\n## Benchmarks\n\n" + new + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    args = p.parse_args()
    if not os.path.exists(os.path.join(args.results, "latest.md")):
        print("update_readme: no %s/latest.md: run benchmarks/run.py first" % args.results, file=sys.stderr)
        return 1
    if not os.path.exists(args.readme):
        print("update_readme: %s does not exist; nothing written" % args.readme, file=sys.stderr)
        return 0
    with open(args.readme) as f:
        text = f.read()
    new_text = replace(text, section(args.results, os.path.dirname(os.path.abspath(args.readme))))
    if new_text != text:
        with open(args.readme, "w") as f:
            f.write(new_text)
        print("update_readme: benchmark section of %s updated" % os.path.relpath(args.readme))
    else:
        print("update_readme: %s already up to date" % os.path.relpath(args.readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
