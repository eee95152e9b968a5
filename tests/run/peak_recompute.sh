#!/bin/sh
# peak_recompute.sh PRIMEC FILE RUN RECOMPUTE_RUN
#
# The predicted peak memory of every device (`explain --json`,
# per_device[].peak) of a pipeline whose stages recompute their forward
# before each backward (`recompute`) is below the same run's without on
# every stage that holds more than one micro-batch at once (every stage
# but the last in 1F1B's order; tests/run/stages_1f1b.prime), and not
# above it on the last; the redistribution bytes are the same and the
# collective bytes not fewer (a recomputed forward's all-reduces run again).
# The program's counters equal these predictions (its --check,
# tests/layers.cmake).
set -u
primec=$1 file=$2 base=$3 rc=$4
"$primec" explain "$file" --model "$base" --json >"${TMPDIR:-/tmp}/peak_rc_b.$$" || exit 1
"$primec" explain "$file" --model "$rc" --json >"${TMPDIR:-/tmp}/peak_rc_r.$$" || exit 1
python3 - "${TMPDIR:-/tmp}/peak_rc_b.$$" "${TMPDIR:-/tmp}/peak_rc_r.$$" <<'PY'
import json, sys
b, r = (json.load(open(p)) for p in sys.argv[1:3])
ok = r["microbatches"]["recompute"] and not b["microbatches"]["recompute"]
axes = [a["axis"] for a in r["mesh"]]
sizes = [a["size"] for a in r["mesh"]]
k = axes.index(r["stages"]["axis"])
nstages = r["stages"]["count"]
inner = 1
for s in sizes[k + 1:]:
    inner *= s
ok = ok and len(b["per_device"]) == len(r["per_device"]) > 0
for x, y in zip(b["per_device"], r["per_device"]):
    stage = x["rank"] // inner % sizes[k]
    print("rank %d (stage %d): peak %d, recomputed %d bytes" % (x["rank"], stage, x["peak"], y["peak"]))
    ok = ok and (y["peak"] < x["peak"] if stage < nstages - 1 else y["peak"] <= x["peak"])
    ok = ok and x["redist"] == y["redist"] and x["shift"] == y["shift"]
    ok = ok and y["collective"] >= x["collective"]
print("PASS" if ok else "FAIL: the recomputed run's peaks are not below the others")
PY
rc=$?
rm -f "${TMPDIR:-/tmp}/peak_rc_b.$$" "${TMPDIR:-/tmp}/peak_rc_r.$$"
exit $rc
