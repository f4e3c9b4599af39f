# Draws benchmarks/results/latest.png from latest.json: a grouped bar chart of
# messages/s per workload (groups) and client (bars), on a log scale.
# Run by benchmarks/run.py with the matplotlib of .bench-venvs/tools.
from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(json_path: str, png_path: str) -> None:
    with open(json_path) as f:
        report = json.load(f)
    workloads = report["workloads"]
    results = report["results"]
    color_of = {c["key"]: i for i, c in enumerate(report["clients"])}  # stable colours across runs
    clients = [
        c for c in report["clients"]
        if any(results.get(w["key"], {}).get(c["key"], {}).get("status") == "ok" for w in workloads)
    ]
    if not clients:
        raise SystemExit("nothing measured")
    fig, ax = plt.subplots(figsize=(max(10, 1.6 * len(workloads) + 3), 6.5), dpi=110)
    width = 0.84 / len(clients)
    cmap = plt.get_cmap("tab10")
    for i, c in enumerate(clients):
        xs, ys = [], []
        for j, w in enumerate(workloads):
            cell = results.get(w["key"], {}).get(c["key"], {})
            if cell.get("status") == "ok":
                xs.append(j - 0.42 + width * (i + 0.5))
                ys.append(cell["rate"])
        ax.bar(xs, ys, width=width, label=c["label"], color=cmap(color_of[c["key"]] % 10), edgecolor="white", linewidth=0.4)
    ax.set_yscale("log")
    ax.set_ylabel("messages / second (log scale)")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels([w["label"].replace("`", "").replace(", ", ",\n", 1) for w in workloads], fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.set_axisbelow(True)
    m = report.get("machine", {})
    title = "nsqfast vs pynsq, gnsq, go-nsq, nsq bench tools (median of %d runs%s)" % (
        report.get("repeats", 3), ", QUICK smoke run" if report.get("quick") else ""
    )
    ax.set_title(title, fontsize=11)
    fig.text(
        0.99, 0.01,
        "%s, %s cores; %s" % (m.get("cpu", "?"), m.get("cores", "?"), (m.get("nsqd") or "").split(" (")[0]),
        ha="right", va="bottom", fontsize=7, color="gray",
    )
    ax.legend(fontsize=8, ncol=min(4, len(clients)), loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    fig.tight_layout()
    fig.savefig(png_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
