#!/bin/sh
# stages_plan_write.sh PRIMEC EXAMPLE GOLDEN DIR [rc]
#
# `primec plan --training -o` on a small staged plan (tests/layers.cmake):
# OPT's small layer, 2 layers on 8 devices under a memory limit that
# only 2 pipeline stages of a 2-device tensor mesh (times 2 replicas, 2
# micro-batches of one sequence each) meet. With `rc`, a tighter limit
# (700,000 bytes) that the same mesh meets only with 4 micro-batches and
# recomputed activations (--recompute auto): the search chooses them and
# the plan carries `microbatches ... order 1f1b recompute`. The written
# plan must equal GOLDEN (its import line, which depends on DIR, set to
# the example's name), carry `stages` and `microbatches ... order 1f1b`,
# and build and pass `--check` on the cpu backend with counters equal to
# the prediction.
set -u
primec=$1 example=$2 golden=$3 dir=$4 case=${5:-plain}
. "$(dirname "$0")/plan_write_lib.sh"

if [ "$case" = rc ]; then
    set -- --global-batch 8 --memory-limit 700000 --recompute auto
    want='x 2 stages x 2 replicas; micro-batch 1 (4 per replica), activations recomputed'
    line='^    microbatches s: 4 order 1f1b recompute;$'
else
    set -- --global-batch 4 --memory-limit 800000 --recompute off
    want='x 2 stages x 2 replicas; micro-batch 1 (2 per replica)'
    line='^    microbatches s: 2 order 1f1b;$'
fi
rm -rf "$dir"
mkdir -p "$dir" || fail "cannot create $dir"
"$primec" plan "$example" --model opt --param layers=1 --training --layers 2 --micro-batch 1 \
    --devices 8 --profile v100 --tp-max 2 "$@" -o "$dir/planned.prime" >"$dir/plan.out" ||
    fail "primec plan failed"
grep -q "$want" "$dir/plan.out" || fail "the search chose another plan: $(sed -n 2p "$dir/plan.out")"
grep -q "$line" "$dir/planned.prime" || fail "the written plan's micro-batches are not '$line'"
sed 's|^import ".*";$|import "examples/opt_layer.prime";|' "$dir/planned.prime" >"$dir/planned.norm"
diff -u "$golden" "$dir/planned.norm" || fail "the written plan differs from $golden"
built_check "$dir" "$dir/planned.prime" opt_planned
echo "PASS: the written training plan ($case) builds and passes --check"
