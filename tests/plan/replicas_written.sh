#!/bin/sh
# primec plan -o of a batched model whose plan splits the batch along one
# mesh axis writes its data-parallel replicas as that axis made longer:
# the written run has every device and the whole batch, checks, and its
# program all-reduces the weight gradients across the replicas and passes
# --check. An unbatched model's plan stays one replica (the tokens divided).
#   replicas_written.sh PRIMEC EXAMPLES_DIR WORK_DIR
set -e
primec=$1 ex=$2 d=$3
rm -rf "$d" && mkdir -p "$d"
"$primec" plan "$ex/opt_layer.prime" --model opt_b --devices 8 --profile v100 --no-program \
    -o "$d/b.prime" >"$d/b.out"
dp=$(sed -n 's/.*x \([0-9]*\) data-parallel replicas*$/\1/p' "$d/b.out")
[ "$dp" -gt 1 ] || { echo "expected replicas in: $(cat "$d/b.out")"; exit 1; }
grep -q "written as its axis" "$d/b.prime" || { cat "$d/b.prime"; exit 1; }
grep -q "b = 4," "$d/b.prime" || { echo "the batch is not whole"; cat "$d/b.prime"; exit 1; }
"$primec" check "$d/b.prime" --model opt_b_planned | grep -q "on 8 devices" ||
    { echo "the written run is not on 8 devices"; exit 1; }
# Each weight gradient is all-reduced over a group of (replicas x the
# searched axis) devices.
"$primec" explain "$d/b.prime" --model opt_b_planned --json >"$d/b.json"
python3 - "$d/b.json" "$dp" <<'PY'
import json, sys
ex = json.load(open(sys.argv[1]))
dp = int(sys.argv[2])
sizes = {len(c["group"]) for ph in ex["phases"] if ph["phase"] == "gradient"
         for c in ph["collectives"]}
print("gradient all-reduce group sizes:", sorted(sizes), "replicas:", dp)
sys.exit(0 if sizes and min(sizes) >= dp else 1)
PY
"$primec" build "$d/b.prime" --model opt_b_planned -o "$d/bin" >/dev/null
"$d/bin/opt_b_planned" --check | grep -q '^check passed$'
# Unbatched: the tokens fold into s, which the Megatron plan does not
# split: the run is one replica, the tokens divided.
"$primec" plan "$ex/opt_layer.prime" --model opt_small_megatron --devices 8 --tp-max 4 \
    --profile v100 --no-program -o "$d/u.prime" >"$d/u.out"
grep -q "x 2 data-parallel replicas$" "$d/u.out" || { head -1 "$d/u.out"; exit 1; }
grep -q "The run is one replica" "$d/u.prime" || { cat "$d/u.prime"; exit 1; }
grep -q "s = 8," "$d/u.prime" || { echo "the tokens are not divided"; cat "$d/u.prime"; exit 1; }
echo "replicas written as a mesh axis: ok"
