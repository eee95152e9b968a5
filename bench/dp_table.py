#!/usr/bin/env python3
"""Table of the data-parallel runs of the example layers (runs named *_dp).

For every run whose name ends in `_dp` in the given .prime files, it
reports the mesh (replicas x devices per replica), the batch b of one step
of the program and the sequences per replica, and per device: collective
bytes, the part of them that reduces weight gradients (the gradient
phases' all-reduces: over the replicas, and over the devices of a replica
where the plan splits the rows), point-to-point (shift + redistribution)
bytes and peak memory, all from `primec explain --json`. With --run the
small runs (`_small` in the name) are also built and run on the cpu
backend with --check, and the measured counters of every device are
compared with the prediction.

    bench/dp_table.py [--primec build/compiler/primec] [--run] FILE...

Prints a Markdown table on stdout.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from primec_tools import explain, fmt_bytes, measure, models_in  # noqa: E402


def runs_in(primec, path):
    return [n for n in models_in(primec, path) if n.endswith("_dp")]


def grad_bytes(ex):
    """Bytes each device sends in the gradient phases' collectives (max over devices)."""
    per = [0.0] * ex["devices"]
    for ph in ex["phases"]:
        if ph["phase"] != "gradient":
            continue
        for c in ph["collectives"]:
            for rank in c["group"]:
                per[rank] += c["bytes"] / len(c["group"])
    return max(per)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default="build/compiler/primec")
    ap.add_argument("--run", action="store_true", help="build and run the small runs")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    print("| run | mesh | b (per replica) | collective bytes / device | of which weight gradients "
          "| p2p bytes / device | peak memory / device | measured |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for path in args.files:
            for run in runs_in(args.primec, path):
                ex = explain(args.primec, path, run)
                mesh = " x ".join("%s %d" % (a["axis"], a["size"]) for a in ex["mesh"])
                replicas = next(a["size"] for a in ex["mesh"] if a["axis"] == "r")
                batch = next(d["size"] for d in ex["instances"][0]["dims"] if d["name"] == "b")
                top = ex["per_device_max"]
                measured = ""
                if args.run and "_small" in run:
                    ranks = measure(args.primec, path, run, work)["ranks"]
                    same = all(r[k] == d[k] for r, d in zip(ranks, ex["per_device"])
                               for k in ("shift", "collective", "redist", "peak"))
                    measured = "= predicted" if same else "DIFFERS"
                print("| %s | %s | %d (%d) | %s | %s | %s | %s | %s |"
                      % (run, mesh, batch, batch // replicas, fmt_bytes(top["collective"]),
                         fmt_bytes(grad_bytes(ex)), fmt_bytes(top["shift"] + top["redist"]),
                         fmt_bytes(top["peak"]), measured))


if __name__ == "__main__":
    main()
