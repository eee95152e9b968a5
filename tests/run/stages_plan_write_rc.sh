#!/bin/sh
# stages_plan_write_rc.sh PRIMEC EXAMPLE GOLDEN DIR
#
# `primec plan --training -o` on a small staged plan whose activations the
# search chooses to recompute (tests/layers.cmake): OPT's small layer, 2
# layers on 8 devices under a memory limit (700,000 bytes) that 2 pipeline
# stages of a 2-device tensor mesh times 2 replicas meet only with 4
# micro-batches of one sequence and recomputation (--recompute auto). The
# written plan must equal GOLDEN (its import line set to the example's
# name), carry `microbatches ... order 1f1b recompute`, and build and pass
# `--check` on the cpu backend with counters equal to the prediction.
set -u
primec=$1 example=$2 golden=$3 dir=$4

fail() {
    echo "FAIL: $*"
    exit 1
}

rm -rf "$dir"
mkdir -p "$dir" || fail "cannot create $dir"
"$primec" plan "$example" --model opt --param layers=1 --training --layers 2 \
    --global-batch 8 --micro-batch 1 --devices 8 --profile v100 --tp-max 2 --memory-limit 700000 \
    --recompute auto -o "$dir/planned.prime" >"$dir/plan.out" || fail "primec plan failed"
grep -q 'x 2 stages x 2 replicas; micro-batch 1 (4 per replica), activations recomputed' "$dir/plan.out" ||
    fail "the search chose another plan: $(sed -n 2p "$dir/plan.out")"
sed 's|^import ".*";$|import "examples/opt_layer.prime";|' "$dir/planned.prime" >"$dir/planned.norm"
grep -q '^    microbatches s: 4 order 1f1b recompute;$' "$dir/planned.prime" ||
    fail "the written plan does not recompute"
diff -u "$golden" "$dir/planned.norm" || fail "the written plan differs from $golden"
"$primec" build "$dir/planned.prime" --model opt_planned -o "$dir/out" >"$dir/build.out" 2>&1 ||
    fail "the written plan does not build: $(tail -3 "$dir/build.out")"
"$dir/out/opt_planned" --check >"$dir/run.out" 2>&1 || fail "--check failed: $(tail -3 "$dir/run.out")"
grep -q "check passed" "$dir/run.out" || fail "no 'check passed'"
grep -q "counters equal the compiler's prediction" "$dir/run.out" ||
    fail "the counters differ from the prediction"
echo "PASS: the written recomputing training plan builds and passes --check"
