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
# Then both are built (kernels fused, which lowers the peaks the program
# counts below explain's unfused ones) and run with --check: each must pass
# with its counters equal to its prediction, and the counted peaks must
# compare the same way.
set -u
primec=$1 file=$2 base=$3 rc=$4
dir=${TMPDIR:-/tmp}/peak_rc.$$
for m in "$base" "$rc"; do
    "$primec" build "$file" --model "$m" -o "$dir/$m" >/dev/null || exit 1
    "$dir/$m/$m" --check >"$dir/$m.out" 2>&1 || { tail -3 "$dir/$m.out"; exit 1; }
    grep -q "counters equal the compiler's prediction" "$dir/$m.out" ||
        { echo "FAIL: $m's counters differ from the prediction"; exit 1; }
done
"$primec" explain "$file" --model "$base" --json >"${TMPDIR:-/tmp}/peak_rc_b.$$" || exit 1
"$primec" explain "$file" --model "$rc" --json >"${TMPDIR:-/tmp}/peak_rc_r.$$" || exit 1
python3 - "${TMPDIR:-/tmp}/peak_rc_b.$$" "${TMPDIR:-/tmp}/peak_rc_r.$$" "$dir/$base.out" "$dir/$rc.out" <<'PY'
import json, re, sys
b, r = (json.load(open(p)) for p in sys.argv[1:3])

def counted(path):
    rows, on = {}, False
    for line in open(path):
        if re.match(r"\s*rank\s+shift bytes", line):
            on = True
        elif on and re.match(r"\s*\d+(\s+\d+){4}\s*$", line):
            v = [int(x) for x in line.split()]
            rows[v[0]] = v[4]
        elif on:
            break
    return rows

cb, cr = counted(sys.argv[3]), counted(sys.argv[4])
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
    n = x["rank"]
    print("rank %d (stage %d): predicted peak %d, recomputed %d; counted (fused build) %s, %s bytes"
          % (n, stage, x["peak"], y["peak"], cb.get(n), cr.get(n)))
    last = stage == nstages - 1
    ok = ok and n in cb and n in cr
    ok = ok and (y["peak"] < x["peak"] if not last else y["peak"] <= x["peak"])
    ok = ok and (cr.get(n, 0) < cb.get(n, 0) if not last else cr.get(n, 0) <= cb.get(n, 0))
    ok = ok and x["redist"] == y["redist"] and x["shift"] == y["shift"]
    ok = ok and y["collective"] >= x["collective"]
print("PASS" if ok else "FAIL: the recomputed run's peaks are not below the others")
PY
rc=$?
rm -f "${TMPDIR:-/tmp}/peak_rc_b.$$" "${TMPDIR:-/tmp}/peak_rc_r.$$"
rm -rf "$dir"
exit $rc
