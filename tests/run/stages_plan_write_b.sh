#!/bin/sh
# stages_plan_write_b.sh PRIMEC EXAMPLE GOLDEN DIR
#
# `primec plan --training -o` of a batched layer (opt_b, tests/layers.cmake):
# 2 layers on 8 devices, a global batch of 4 sequences in micro-batches of
# one, under a memory limit that only 2 pipeline stages of a 2-device
# tensor mesh times 2 replicas (2 micro-batches each) meet. The written
# plan must equal GOLDEN (its import line set to the example's name): the
# replicas along mesh axis r with the batch split over them, micro-batches
# over the batch b. It must build and pass `--check` on the cpu backend
# with counters equal to the prediction, and `primec cost` of the file is
# compared with the search's own figures: the parameters a device holds
# are equal, the collective bytes per device within 2%, and the step time
# of the program is reported beside the search's iteration (the program
# is not faster than the search's estimate, and within 2x of it:
# docs/planner.md, "The plan written", says where they differ).
set -u
primec=$1 example=$2 golden=$3 dir=$4
. "$(dirname "$0")/plan_write_lib.sh"

rm -rf "$dir"
mkdir -p "$dir" || fail "cannot create $dir"
"$primec" plan "$example" --model opt_b --param layers=1 --training --layers 2 \
    --global-batch 4 --micro-batch 1 --devices 8 --profile v100 --tp-max 2 --memory-limit 800000 \
    --recompute off --json -o "$dir/planned.prime" >"$dir/plan.json" || fail "primec plan failed"
sed 's|^import ".*";$|import "examples/opt_layer.prime";|' "$dir/planned.prime" >"$dir/planned.norm"
diff -u "$golden" "$dir/planned.norm" || fail "the written plan differs from $golden"
"$primec" check "$dir/planned.prime" --model opt_b_planned | grep -q "on 8 devices" ||
    fail "the written run is not on 8 devices"
built_check "$dir" "$dir/planned.prime" opt_b_planned
"$primec" cost "$dir/planned.prime" --model opt_b_planned --profile v100 --json >"$dir/cost.json" ||
    fail "primec cost failed"
python3 - "$dir/plan.json" "$dir/cost.json" <<'PY' || fail "the search and primec cost disagree"
import json, sys
plan = json.load(open(sys.argv[1]))["search"]
cost = json.load(open(sys.argv[2]))
assert (plan["stages"], plan["replicas"], plan["micro_batches"]) == (2, 2, 2), plan
mem = cost["training_memory"]
params = plan["pipeline"]["params_device"]
assert max(mem["params"]) == params, (mem["params"], params)
coll = cost["bytes"]["collective"] / cost["devices"]
assert abs(coll - plan["collective_bytes"]) <= 0.02 * plan["collective_bytes"], \
    (coll, plan["collective_bytes"])
search_us = plan["iteration_s"] * 1e6 - plan["pipeline"]["optimizer_us"]
ratio = cost["step_us"] / search_us
print("search %.1f us, primec cost %.1f us (%.2fx); collective bytes per device %.0f / %.0f; "
      "parameters per device %d" % (search_us, cost["step_us"], ratio, plan["collective_bytes"],
                                     coll, params))
assert 1.0 <= ratio <= 2.0, ratio
PY
echo "PASS: the written batched training plan builds, passes --check and is priced alike"
