#!/bin/sh
# peak_order.sh PRIMEC FILE GPIPE_RUN ONEF1B_RUN
#
# The predicted peak memory of every device (`explain --json`,
# per_device[].peak) of a micro-batched pipeline in 1F1B's order is below
# the same run's in GPipe's order where the stage holds fewer micro-batches
# at once (every rank of tests/run/stages_1f1b.prime's runs, M > S), and
# the counters the two orders move are the same (tests/layers.cmake).
set -u
primec=$1 file=$2 gpipe=$3 onef1b=$4
"$primec" explain "$file" --model "$gpipe" --json >"${TMPDIR:-/tmp}/peak_order_g.$$" || exit 1
"$primec" explain "$file" --model "$onef1b" --json >"${TMPDIR:-/tmp}/peak_order_o.$$" || exit 1
python3 - "${TMPDIR:-/tmp}/peak_order_g.$$" "${TMPDIR:-/tmp}/peak_order_o.$$" <<'PY'
import json, sys
g, o = (json.load(open(p))["per_device"] for p in sys.argv[1:3])
ok = len(g) == len(o) > 0
for a, b in zip(g, o):
    print("rank %d: peak gpipe %d, 1f1b %d bytes" % (a["rank"], a["peak"], b["peak"]))
    ok = ok and b["peak"] < a["peak"]
    ok = ok and all(a[k] == b[k] for k in ("shift", "collective", "redist"))
print("PASS" if ok else "FAIL: the 1F1B peaks are not below GPipe's")
PY
rc=$?
rm -f "${TMPDIR:-/tmp}/peak_order_g.$$" "${TMPDIR:-/tmp}/peak_order_o.$$"
exit $rc
