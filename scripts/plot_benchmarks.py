#!/usr/bin/python3
"""Plots of the benchmark drivers' JSON output (their --json FILE; the format is in drivers/bench_json.hpp).

    scripts/plot_benchmarks.py bench_solve.json bench_cholesky.json --out docs/benchmarks

The drivers that write such files: bench_solve, bench_cholesky, bench_dense_trsv and bench_sptrsv.

For each JSON file, named after its "benchmark" field:
  <out>/<benchmark>_speedup.png  per matrix, baseline time / spade time for every comparison and baseline
                                 (log scale; above 1 means spade is faster)
  <out>/<benchmark>_floor.png    where the rows have "floor_seconds": per matrix, spade's time of the first
                                 comparison against the floor (the time of reading the data it must read at
                                 the measured copy bandwidth; the document's "floor" says what is read),
                                 with the ratio over each pair of bars
Needs matplotlib (Debian python3-matplotlib); draws off-screen (Agg). Prints the files it writes.
"""

import argparse
import json
import pathlib
import textwrap
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402


def load(path):
    """The document, with its rows that have comparisons (skipped rows are left out)."""
    with open(path) as f:
        doc = json.load(f)
    for key in ("benchmark", "rows"):
        if key not in doc:
            raise ValueError(f"{path}: no '{key}' field; is it a benchmark driver's --json output?")
    doc["rows"] = [r for r in doc["rows"] if r.get("comparisons")]
    if not doc["rows"]:
        raise ValueError(f"{path}: no row with comparisons")
    return doc


def seconds(value):
    """A time from the JSON as a float; NaN for a figure that was not measured (null)."""
    return float(value) if isinstance(value, (int, float)) else float("nan")


def subtitle(doc):
    machine = doc.get("machine", {})
    parts = [str(v) for k, v in machine.items() if k in ("device", "cpu")]
    settings = doc.get("settings", {})
    if "threads" in settings:
        parts.append(f"{settings['threads']} host threads")
    return ", ".join(parts)


def finish_log_axis(ax, values):
    """Log scale with plain tick labels, room above the tallest bar for its label, the legend below."""
    finite = [v for v in values if np.isfinite(v) and v > 0]
    ax.set_yscale("log")
    if finite:
        ax.set_ylim(min(min(finite), 1.0) / 1.5, max(finite) * 2.5)
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    low, high = ax.get_ylim()
    # Less than about a decade shown: label the minor ticks too, else the axis has one label or none.
    ax.yaxis.set_minor_formatter(plain if high / low < 20 else matplotlib.ticker.NullFormatter())
    ax.tick_params(axis="y", which="minor", labelsize=7)
    handles, labels = ax.get_legend_handles_labels()
    labels = [textwrap.fill(label, 70) for label in labels]
    ax.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1,
              frameon=False)


def plot_speedup(doc, out):
    rows = doc["rows"]
    matrices = [r["matrix"] for r in rows]
    # One series per (comparison, baseline) pair, in the order they first appear.
    series = []
    for r in rows:
        for c in r["comparisons"]:
            for baseline in c["baselines"]:
                if (c["what"], baseline) not in series:
                    series.append((c["what"], baseline))
    width = 0.8 / len(series)
    x = np.arange(len(matrices))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(matrices) + 2), 5.5))
    everything = []
    for k, (what, baseline) in enumerate(series):
        speedups = []
        for r in rows:
            c = next((c for c in r["comparisons"] if c["what"] == what), None)
            t = seconds(c["baselines"].get(baseline)) if c else np.nan
            mine = seconds(c["spade_seconds"]) if c else np.nan
            speedups.append(t / mine if mine > 0 else np.nan)
        everything += speedups
        bars = ax.bar(x + (k - (len(series) - 1) / 2) * width, speedups, width, label=f"{what}: {baseline} / spade")
        ax.bar_label(bars, labels=[f"{s:.3g}x" if np.isfinite(s) else "" for s in speedups], fontsize=7,
                     padding=2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, matrices, rotation=30, ha="right")
    ax.set_ylabel("speedup (baseline time / spade time)")
    ax.set_title(f"{doc['benchmark']}: spade against the baselines\n{subtitle(doc)}", fontsize=10)
    finish_log_axis(ax, everything)
    fig.tight_layout()
    path = out / f"{doc['benchmark']}_speedup.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_floor(doc, out):
    rows = [r for r in doc["rows"]
            if seconds(r.get("floor_seconds")) > 0 and seconds(r["comparisons"][0]["spade_seconds"]) > 0]
    if not rows:
        return None
    what = rows[0]["comparisons"][0]["what"]
    matrices = [r["matrix"] for r in rows]
    spade_ms = np.array([r["comparisons"][0]["spade_seconds"] * 1e3 for r in rows])
    floor_ms = np.array([r["floor_seconds"] * 1e3 for r in rows])
    x = np.arange(len(matrices))
    fig, ax = plt.subplots(figsize=(max(6, 1.0 * len(matrices) + 2), 5.5))
    ax.bar(x - 0.2, floor_ms, 0.4, label="floor: " + doc.get("floor", "the data read at the copy bandwidth"))
    bars = ax.bar(x + 0.2, spade_ms, 0.4, label=f"spade ({what})")
    ax.bar_label(bars, labels=[f"{s / f:.2f}x" for s, f in zip(spade_ms, floor_ms)], fontsize=7, padding=2)
    ax.set_xticks(x, matrices, rotation=30, ha="right")
    ax.set_ylabel("milliseconds")
    ax.set_title(f"{doc['benchmark']}: time against the bandwidth floor\n{subtitle(doc)}", fontsize=10)
    finish_log_axis(ax, list(floor_ms) + list(spade_ms))
    ax.set_ylim(bottom=min(floor_ms.min(), spade_ms.min()) / 1.5)
    fig.tight_layout()
    path = out / f"{doc['benchmark']}_floor.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="a benchmark driver's --json output")
    parser.add_argument("--out", default="docs/benchmarks", help="folder of the PNG files (default: %(default)s)")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        for path in args.json:
            doc = load(path)
            for written in (plot_speedup(doc, out), plot_floor(doc, out)):
                if written:
                    print(written)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"plot_benchmarks: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
