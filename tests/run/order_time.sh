#!/bin/sh
# order_time.sh PRIMEC FILE GPIPE_RUN ONEF1B_RUN
#
# The step time `primec cost --json` predicts (on the v100 profile, from
# the programs' own action lists) for a micro-batched pipeline in 1F1B's
# order is not above the same run's in GPipe's order, at the same bytes
# (tests/layers.cmake). It was above while a stage's boundary send ran at
# the receiving phase's place in the sender's list (compiler/sched_sends.c
# posts it where the value is made).
set -u
primec=$1 file=$2 gpipe=$3 onef1b=$4
tmp=${TMPDIR:-/tmp}/order_time.$$
"$primec" cost "$file" --model "$gpipe" --profile v100 --json >"$tmp.g" || exit 1
"$primec" cost "$file" --model "$onef1b" --profile v100 --json >"$tmp.o" || exit 1
python3 - "$tmp.g" "$tmp.o" <<'PY'
import json, sys
g, o = (json.load(open(p)) for p in sys.argv[1:3])
print("step gpipe %.3f us, 1f1b %.3f us" % (g["step_us"], o["step_us"]))
ok = o["step_us"] <= g["step_us"] and g["bytes"] == o["bytes"]
print("PASS" if ok else "FAIL: 1F1B's step is longer than GPipe's, or their bytes differ")
PY
rc=$?
rm -f "$tmp.g" "$tmp.o"
exit $rc
