#!/usr/bin/env python3
"""Side-by-side table of the Megatron-LM plan and the square-grid plan of
each example model.

For every model pair NAME_megatron / NAME_square (and NAME_small_megatron /
NAME_small_square) in the given .prime files, it reports per device:
collective bytes, point-to-point (shift + redistribution) bytes and peak
memory, and the square/Megatron ratios. Published-shape models are analysed
only (`primec explain --json`); small models are also built and run on the
cpu backend, and the measured counters are reported next to the
prediction.

    bench/compare_plans.py [--primec build/compiler/primec] [--run] FILE...

Prints a Markdown table on stdout.
"""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from primec_tools import explain, fmt_bytes, measure, models_in  # noqa: E402


def summary(per_device):
    """Max over devices of each figure (devices are symmetric in these plans)."""
    return {
        "coll": max(d["collective"] for d in per_device),
        "p2p": max(d["shift"] + d["redist"] for d in per_device),
        "peak": max(d["peak"] for d in per_device),
    }


def ratio(a, b):
    if b == 0:
        return "—" if a == 0 else "∞"
    return "%.2f" % (a / b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default="build/compiler/primec")
    ap.add_argument("--run", action="store_true", help="build and run the small models")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as work:
        for path in args.files:
            names = models_in(args.primec, path)
            for meg in names:
                m = re.match(r"(.*)_megatron$", meg)
                if not m or m.group(1) + "_square" not in names:
                    continue
                sq = m.group(1) + "_square"
                a = summary(explain(args.primec, path, meg)["per_device"])
                b = summary(explain(args.primec, path, sq)["per_device"])
                sp = None
                if meg + "_sp" in names:
                    sp = summary(explain(args.primec, path, meg + "_sp")["per_device"])
                measured = ""
                if args.run and "_small" in meg:
                    ma = summary(measure(args.primec, path, meg, work)["ranks"])
                    mb = summary(measure(args.primec, path, sq, work)["ranks"])
                    same = ma == a and mb == b
                    measured = "measured = predicted" if same else "measured: %s / %s" % (ma, mb)
                rows.append((m.group(1), a, b, measured, sp))

    print("| model | plan | collective bytes / device | p2p bytes / device | peak memory / device |")
    print("|---|---|---|---|---|")
    for name, a, b, measured, sp in rows:
        print("| %s | Megatron | %s | %s | %s |" % (name, fmt_bytes(a["coll"]), fmt_bytes(a["p2p"]), fmt_bytes(a["peak"])))
        if sp:
            print("| | Megatron, sequence parallel | %s | %s | %s |" % (fmt_bytes(sp["coll"]), fmt_bytes(sp["p2p"]), fmt_bytes(sp["peak"])))
        print("| | square grid | %s | %s | %s |" % (fmt_bytes(b["coll"]), fmt_bytes(b["p2p"]), fmt_bytes(b["peak"])))
        print("| | square / Megatron | %s | %s | %s %s|" % (ratio(b["coll"], a["coll"]), ratio(b["p2p"], a["p2p"]),
                                                       ratio(b["peak"], a["peak"]), ("(" + measured + ") ") if measured else ""))


if __name__ == "__main__":
    main()
