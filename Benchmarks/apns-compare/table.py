#!/usr/bin/env python3
"""Prints run.sh's comparison table from its results.tsv (or, with --line, one run's figures): per tool and connection count, the run
with the most notifications/s.

Each results.tsv line: tool, connections, the tool's --json figures, client CPU s (user+system of
the whole process), client max RSS KB (/usr/bin/time), sandbox CPU s across the run, 1-minute load
average when the run started.
"""
import json
import sys

NAMES = {
    "pushctl": "pushctl bench (nghttp2+OpenSSL)",
    "ahc": "APNSwift-style (AsyncHTTPClient)",
    "ahc-drain": "  same, 200 body drained",
    "aioapns": "aioapns 4.0 (Python asyncio)",
}
ORDER = list(NAMES)


def main(path):
    best = {}
    runs = {}
    with open(path) as file:
        for line in file:
            tool, connections, figures, client_cpu, rss_kb, sandbox_cpu, load = line.rstrip("\n").split("\t")
            row = json.loads(figures)
            row.update(tool=tool, k=int(connections), client_cpu=float(client_cpu), rss_mb=int(rss_kb) / 1024,
                       sandbox_cpu=float(sandbox_cpu), load=float(load))
            key = (tool, row["k"])
            runs[key] = runs.get(key, 0) + 1
            if key not in best or row["accepted"] / row["seconds"] > best[key]["accepted"] / best[key]["seconds"]:
                best[key] = row
    if not best:
        print("no successful runs")
        return 1

    header = ["tool", "conns", "in flight", "sent", "accepted/s", "p50 ms", "p99 ms", "peak RSS MB",
              "CPU s client", "CPU s sandbox", "µs/notif client", "µs/notif sandbox", "errors", "load"]
    rows = []
    for key in sorted(best, key=lambda key: (key[1], ORDER.index(key[0]))):
        row = best[key]
        conns = str(row["k"])
        if "connections_used" in row and row["connections_used"] != row["k"]:
            conns = f"{row['connections_used']} (max {row['k']})"
        errors = sum(row["errors"].values()) if row["errors"] else 0
        sent = row["count"] + 1  # the warm-up notification
        rows.append([
            NAMES[row["tool"]], conns, str(row["concurrency"]), str(row["count"]),
            f"{row['accepted'] / max(row['seconds'], 1e-9):,.0f}", f"{row['p50_ms']:.1f}", f"{row['p99_ms']:.1f}",
            f"{row['rss_mb']:.0f}", f"{row['client_cpu']:.2f}", f"{row['sandbox_cpu']:.2f}",
            f"{row['client_cpu'] / sent * 1e6:.0f}", f"{row['sandbox_cpu'] / sent * 1e6:.0f}",
            str(errors), f"{row['load']:.1f}",
        ])
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |")
    print(f"best of {max(runs.values())} runs each (by accepted/s: notifications answered 200 per second of the timed part); CPU s client = user+system of the whole client process "
          "(start-up and warm-up included); CPU s sandbox = apns-sandbox across the run; load = 1-minute load "
          "average at the start of the best run.")
    return 0


def line(path):
    """One run's figures on one line, from a tool's --json output."""
    with open(path) as file:
        row = json.load(file)
    errors = ", ".join(f"{reason}: {number}" for reason, number in row["errors"].items()) or "none"
    print(f"{row['notifications_per_second']:.0f}/s, p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, errors {errors}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--line":
        sys.exit(line(sys.argv[2]))
    if len(sys.argv) != 2:
        sys.exit("usage: table.py RESULTS.tsv | table.py --line RUN.json")
    sys.exit(main(sys.argv[1]))
