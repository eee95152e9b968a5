#!/usr/bin/env python3
"""compare_counters.py — one run test: build a model, run it, compare.

    compare_counters.py PRIMEC MODEL.prime WORKDIR PARTITION

1. `primec build MODEL.prime -o WORKDIR` (emits and compiles the program);
2. runs the program with `--check --json WORKDIR/counters.json`: it must
   exit 0 (every result tile matches the dense reference and the counters
   equal the compiler's prediction, by the program's own account);
3. `primec explain --json MODEL.prime`, and compares its "per_device"
   array with the program's counted bytes per rank and kind (shift,
   collective, redist) and peak bytes: exactly, rank by rank;
4. checks the communication the stdlib partition PARTITION must have
   (e.g. square: no collective in any phase and only ring shifts; row: one
   forward all-reduce of y), as explain reports it; a partition this
   script has no expectations for gets steps 1-3 only, and a note.

Exits 0 when everything holds, 1 with a message per failure otherwise.
"""
import json
import subprocess
import sys

COUNTER_KEYS = ("shift", "collective", "redist", "peak")
PHASES = ("forward", "backward", "gradient")

# The collectives each stdlib partition must have on more than one device,
# as (phase, kind, tensor); any other collective is a failure.
EXPECTED_COLLECTIVES = {
    "replicate": set(),
    "data": {("gradient", "all-reduce", "dw")},
    "column": {("backward", "all-reduce", "dx")},
    "row": {("forward", "all-reduce", "y")},
    "square": set(),
    "square_skew": set(),
    "ring": set(),
}
# How many devices hold each tile of x, w and y (explain's "stored"), as a
# multiple of the device count (1) or as one copy (0).
STORED = {
    "replicate": {"x": 1, "w": 1, "y": 1},
    "data": {"x": 0, "w": 1, "y": 0},
    "column": {"x": 1, "w": 0, "y": 0},
    "row": {"x": 0, "w": 0, "y": 1},
    "square": {"x": 0, "w": 0, "y": 0},
    "square_skew": {"x": 0, "w": 0, "y": 0},
    "ring": {"x": 0, "w": 0, "y": 0},
}
# Partitions whose tensors never move between steps.
NO_MOVES = {"replicate", "data", "column", "row"}

failures = []


def fail(msg):
    failures.append(msg)


def run(cmd, what):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write("%s failed (exit %d): %s\n%s%s" % (
            what, proc.returncode, " ".join(cmd), proc.stdout, proc.stderr))
        sys.exit(1)
    return proc.stdout


def check_counters(explain, counters):
    predicted = explain["per_device"]
    counted = counters["ranks"]
    if len(predicted) != explain["devices"] or len(counted) != explain["devices"]:
        fail("rank count: explain has %d, the program reports %d, the model has %d devices" % (
            len(predicted), len(counted), explain["devices"]))
        return
    for p, c in zip(predicted, counted):
        if p["rank"] != c["rank"]:
            fail("rank order differs: explain rank %s, program rank %s" % (p["rank"], c["rank"]))
            continue
        for key in COUNTER_KEYS:
            if p[key] != c[key]:
                fail("rank %d %s: explain predicts %d, the program counted %d" % (
                    p["rank"], key, p[key], c[key]))
    if counters.get("counters_match_prediction") is not True:
        fail("the program says its counters do not match the prediction")
    if "check" not in counters:
        fail("the program's JSON has no 'check' results")


def check_partition(explain, partition):
    ndev = explain["devices"]
    phases = {p["phase"]: p for p in explain["phases"]}
    for name in PHASES:
        if name not in phases:
            fail("explain has no %s phase" % name)
    if failures:
        return
    found = set()
    for p in explain["phases"]:
        for c in p["collectives"]:
            found.add((p["phase"], c["kind"], c["tensor"]))
            if sorted(c["group"]) != list(range(ndev)):
                fail("%s: %s of %s over ranks %s, not all %d devices" % (
                    p["phase"], c["kind"], c["tensor"], c["group"], ndev))
        if p["redistributions"]:
            fail("%s phase has redistributions: %s" % (p["phase"], p["redistributions"]))
        for m in p["moves"]:
            if m["kind"] != "shift":
                fail("%s phase moves %s by %s, not by a ring shift" % (
                    p["phase"], m["tensor"], m["kind"]))
            if partition in NO_MOVES or ndev == 1:
                fail("%s phase moves %s; partition %s on %d devices moves nothing" % (
                    p["phase"], m["tensor"], partition, ndev))
    expected = EXPECTED_COLLECTIVES[partition] if ndev > 1 else set()
    if found != expected:
        fail("collectives (phase, kind, tensor): expected %s, explain has %s" % (
            sorted(expected), sorted(found)))
    if partition == "ring" and ndev > 1:
        moved = {(p["phase"], m["tensor"]) for p in explain["phases"] for m in p["moves"]}
        if ("forward", "w") not in moved:
            fail("ring: w does not travel in the forward phase (moves: %s)" % sorted(moved))
    if partition in ("square", "square_skew"):
        for name in PHASES:
            tensors = {m["tensor"] for m in phases[name]["moves"]}
            if ndev > 1 and len(tensors) != 2:
                fail("square: %s phase moves %s; expected two tensors" % (name, sorted(tensors)))
    stored = {t["name"]: t["stored"] for t in explain["tensors"]}
    for name, per_device in sorted(STORED[partition].items()):
        want = ndev if per_device else 1
        if stored.get(name) != want:
            fail("%s: %s is stored %s times, expected %d" % (partition, name, stored.get(name), want))


def main():
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    primec, model, workdir, partition = sys.argv[1:]
    out = run([primec, "build", model, "-o", workdir], "primec build")
    exe = out.strip().splitlines()[-1]
    counters_path = workdir + "/counters.json"
    run([exe, "--check", "--json", counters_path], "the emitted program with --check")
    with open(counters_path) as f:
        counters = json.load(f)
    explain = json.loads(run([primec, "explain", "--json", "--ranks", "all", model], "primec explain --json"))
    check_counters(explain, counters)
    if partition in EXPECTED_COLLECTIVES:
        check_partition(explain, partition)
    else:
        print("note: no expectations for partition %s in compare_counters.py; "
              "only the counters were compared" % partition)
    if failures:
        for msg in failures:
            sys.stderr.write("FAIL: %s\n" % msg)
        return 1
    print("%s: %d devices, counters equal explain's per_device on every rank" % (
        model, explain["devices"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
