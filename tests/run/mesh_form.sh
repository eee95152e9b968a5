#!/bin/sh
# mesh_form.sh PRIMEC DIR matmul
# mesh_form.sh PRIMEC DIR model FILE MODEL
#
# The square grid's emitted program does not grow with the mesh
# (docs/program-form.md, "Steps: loops"): every phase is one loop over its
# steps, whose trip count is the mesh size, so the unformatted C
# (--dump-after=emit) of P x P devices is the same on 2x2, 4x4 and 8x8.
#
# matmul: a square (Cannon) matmul, m = k = n = 32 P: the three programs
# are identical once their numbers (mesh sizes, extents, tags, trip
# counts) are taken out; the 8x8 one is built and passes --check with
# its counters equal to the prediction.
# model: a model with a square plan at --param P=2, 4, 8 (two layers):
# the 4x4 and 8x8 programs hold as many action forms as each other, and
# no program's C is 2% larger than the smallest's.
set -u
primec=$1 dir=$2 mode=$3

fail() {
    echo "FAIL: $*"
    exit 1
}

rm -rf "$dir"
mkdir -p "$dir" || fail "cannot create $dir"

if [ "$mode" = matmul ]; then
    for p in 2 4 8; do
        n=$((32 * p))
        cat >"$dir/sq$p.prime" <<MODEL
model sq {
    param m = $n, k = $n, n = $n;
    mesh(i: $p, j: $p);
    input x[m, k];
    weight w[k, n];
    y = matmul(x, w) use square;
}
MODEL
        "$primec" build "$dir/sq$p.prime" --dump-after=emit >"$dir/sq$p.c" ||
            fail "primec build of the square matmul on ${p}x$p"
        tr -d '0-9' <"$dir/sq$p.c" >"$dir/sq$p.shape"
        echo "square matmul ${p}x$p: $(wc -c <"$dir/sq$p.c") bytes of C"
    done
    cmp -s "$dir/sq2.shape" "$dir/sq4.shape" || fail "the C of 2x2 and 4x4 differ in more than numbers"
    cmp -s "$dir/sq4.shape" "$dir/sq8.shape" || fail "the C of 4x4 and 8x8 differ in more than numbers"
    grep -q "\.skip = " "$dir/sq2.c" || fail "no phase of the 2x2 program is a loop over its steps"
    exe=$("$primec" build "$dir/sq8.prime" -o "$dir/bin") || fail "primec build of the 8x8 matmul"
    "$exe" --check >"$dir/run.out" 2>&1
    rc=$?
    tail -2 "$dir/run.out"
    [ "$rc" -eq 0 ] || fail "$exe --check exited with $rc"
    grep -q "^check passed$" "$dir/run.out" || fail "no 'check passed'"
    grep -q "counters equal the compiler's prediction" "$dir/run.out" ||
        fail "counters differ from the prediction"
    echo PASS
    exit 0
fi

file=$4 model=$5
for p in 2 4 8; do
    "$primec" build "$file" --model "$model" --param "P=$p" --param layers=2 --dump-after=emit \
        >"$dir/p$p.c" || fail "primec build --param P=$p"
done
s2=$(wc -c <"$dir/p2.c")
s4=$(wc -c <"$dir/p4.c")
s8=$(wc -c <"$dir/p8.c")
f2=$(grep -c '{\.a = ' "$dir/p2.c")
f4=$(grep -c '{\.a = ' "$dir/p4.c")
f8=$(grep -c '{\.a = ' "$dir/p8.c")
echo "emitted C: 2x2 $s2 bytes ($f2 action forms), 4x4 $s4 ($f4), 8x8 $s8 ($f8)"
[ "$f4" -eq "$f8" ] || fail "the 8x8 program has $f8 action forms, the 4x4 one $f4"
awk -v a="$s2" -v b="$s4" -v c="$s8" 'BEGIN {
    lo = a; hi = a
    if (b < lo) lo = b
    if (c < lo) lo = c
    if (b > hi) hi = b
    if (c > hi) hi = c
    printf "largest / smallest: %.4f (bound 1.02)\n", hi / lo
    exit !(hi <= 1.02 * lo)
}' || fail "the C grows by more than 2% with the mesh"
echo PASS
