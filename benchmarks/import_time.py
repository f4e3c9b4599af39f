"""Start-up time: how long ``import X`` takes in a fresh process, ours beside the incumbents (issue 49).

Cases (each one `python -c "import time; t=time.perf_counter(); import X; print(...)"` in a fresh
process, from a neutral working directory so that only the venv's packages are found):

  pulsarfast    import pulsarfast                       (.venv)
  pulsar        import pulsar, the official client 3.13 (.venv)
  nsq           import nsq, nsqfast's                   (.venv)
  pynsq         import nsq, pynsq 0.9.1 + tornado       (.bench-venvs/pynsq; if missing:
                ONLY=pynsq PYTHON=python3 bash benchmarks/setup_peers.sh)

and, since nsq and pulsarfast load their machinery when a program first uses it, the same up to
the classes a program starts with: `from pulsarfast import Client` / `from pulsar import Client`,
`from nsq import Reader, Writer` (ours and pynsq's).

Bytecode (--bytecode): "cached" (the default) gives every case its modules' .pyc files, as an
installed package has them (pip compiles at install): the processes read and write them under a
PYTHONPYCACHEPREFIX of the run's own, which the untimed warm-up import of each case fills. "as-is"
leaves the environment alone: in a checkout without __pycache__ and with PYTHONDONTWRITEBYTECODE=1
(as here), nsq's and pulsarfast's modules are compiled at every start while the official client's
and pynsq's come compiled from site-packages (how issue 49 measured it).

The warm-up import of each case also warms the file cache; the timed runs then go round the
cases in turn (round 1 of every case, round 2 of every case, ...), so a busy spell of the machine
falls on all of them alike. Each figure is the median of --runs runs (default 5); the runs
themselves are kept in the JSON.

Usage:
    .venv/bin/python benchmarks/import_time.py              # 5 runs each, bytecode cached
    .venv/bin/python benchmarks/import_time.py --runs 11 --bytecode as-is
    .venv/bin/python benchmarks/import_time.py --tree /tmp/before --output /tmp/before.json
        (nsq and pulsarfast from another checkout, its compiled extensions copied or built in place:
        a before/after comparison)
Writes benchmarks/results/import_time.json and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
PYNSQ_PYTHON = os.path.join(ROOT, ".bench-venvs", "pynsq", "bin", "python")

#: (key, label, python, the statement timed, the key of the case it is compared with)
CASES = (
    ("pulsarfast", "pulsarfast", VENV_PYTHON, "import pulsarfast", "pulsar"),
    ("pulsar", "official pulsar-client 3.13", VENV_PYTHON, "import pulsar", None),
    ("nsq", "nsqfast", VENV_PYTHON, "import nsq", "pynsq"),
    ("pynsq", "pynsq 0.9.1 + tornado", PYNSQ_PYTHON, "import nsq", None),
    ("pulsarfast-client", "pulsarfast", VENV_PYTHON, "from pulsarfast import Client", "pulsar-client"),
    ("pulsar-client", "official pulsar-client 3.13", VENV_PYTHON, "from pulsar import Client", None),
    ("nsq-classes", "nsqfast", VENV_PYTHON, "from nsq import Reader, Writer", "pynsq-classes"),
    ("pynsq-classes", "pynsq 0.9.1 + tornado", PYNSQ_PYTHON, "from nsq import Reader, Writer", None),
)

TIMER = "import time; t = time.perf_counter(); %s; print(time.perf_counter() - t)"


def _environment(python: str, bytecode: str, cache: str, tree: str | None) -> dict[str, str]:
    if bytecode == "as-is":
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
    else:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
        env["PYTHONPYCACHEPREFIX"] = cache
    if tree is not None and python == VENV_PYTHON:
        env["PYTHONPATH"] = tree  # (ahead of the editable install's finder, which comes after the path)
    return env


def _once(python: str, statement: str, cwd: str, env: dict[str, str]) -> float:
    done = subprocess.run([python, "-c", TIMER % statement], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)
    if done.returncode != 0:
        raise SystemExit("%s -c '%s' failed:\n%s" % (python, statement, done.stderr[-2000:]))
    return float(done.stdout.strip().splitlines()[-1])


def measure(runs: int, bytecode: str = "cached", tree: str | None = None) -> dict:
    cases = [case for case in CASES if os.path.exists(case[2])]
    missing = [case[0] for case in CASES if case not in cases]
    results: dict[str, dict] = {key: {"label": label, "python": os.path.relpath(python, ROOT), "statement": statement,
                                      "compared_with": against, "runs_s": []}
                                for key, label, python, statement, against in cases}
    with tempfile.TemporaryDirectory(prefix="import-time-") as neutral:
        cache = os.path.join(neutral, "pycache")
        envs = {key: _environment(python, bytecode, cache, tree) for key, _label, python, _statement, _against in cases}
        for key, _label, python, statement, _against in cases:  # warm the file cache (and fill the bytecode one)
            _once(python, statement, neutral, envs[key])
        for _round in range(runs):
            for key, _label, python, statement, _against in cases:
                results[key]["runs_s"].append(_once(python, statement, neutral, envs[key]))
    for entry in results.values():
        entry["median_ms"] = round(statistics.median(entry["runs_s"]) * 1000, 1)
    for entry in results.values():
        against = results.get(entry["compared_with"] or "")
        if against:
            entry["ratio"] = round(entry["median_ms"] / against["median_ms"], 2)
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": runs,
        "bytecode": bytecode,
        "tree": tree or ".",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "missing": missing,
        "cases": results,
    }


def markdown(data: dict) -> str:
    lines = [
        "| client | statement | median ms | runs (ms) | vs the incumbent |",
        "|---|---|---:|---|---:|",
    ]
    for entry in data["cases"].values():
        lines.append("| %s | `%s` | %.1f | %s | %s |" % (
            entry["label"], entry["statement"], entry["median_ms"], ", ".join("%.0f" % (run * 1000) for run in entry["runs_s"]),
            "%.2f×" % entry["ratio"] if "ratio" in entry else ""))
    how = ("every module's bytecode cached, as installed" if data["bytecode"] == "cached" else
           "bytecode as the environment has it")
    lines += ["", "Median of %d fresh processes each (warm file cache; %s), Python %s, %d CPUs, load average %s; "
              "`.venv/bin/python benchmarks/import_time.py%s`."
              % (data["runs"], how, data["python"], data["cpus"], " ".join("%.2f" % v for v in data["load_average"]),
                 "" if data["bytecode"] == "cached" else " --bytecode as-is")]
    if data["missing"]:
        lines.append("Not measured (interpreter missing): %s." % ", ".join(data["missing"]))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bytecode", choices=("cached", "as-is"), default="cached")
    parser.add_argument("--tree", help="import nsq and pulsarfast from this checkout instead of this one")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "import_time.json"))
    args = parser.parse_args()
    data = measure(args.runs, args.bytecode, os.path.abspath(args.tree) if args.tree else None)
    data["markdown"] = markdown(data)
    with open(args.output, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(data["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
