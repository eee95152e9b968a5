#!/bin/sh
# layer_size.sh PRIMEC FILE MODEL DIR [check]
#
# The emitted program of a model with a repeated layer is (nearly) the
# same size whatever the layer count (docs/program-form.md, "Layers"):
# the unformatted C (--dump-after=emit) of 32 layers is at most 1% larger
# than that of 8 layers (what still grows is the digits of copy and phase
# numbers), and at most twice the 1-layer model's (whose one copy is both
# the first and the last).
# With `check`, the 8-layer program is then built and run with --check,
# which must pass with the counters equal to the prediction.
set -u
primec=$1 file=$2 model=$3 dir=$4 mode=${5:-}

fail() {
    echo "FAIL: $*"
    exit 1
}

rm -rf "$dir"
mkdir -p "$dir" || fail "cannot create $dir"
for n in 1 2 8 32; do
    "$primec" build "$file" --model "$model" --param "layers=$n" --dump-after=emit \
        >"$dir/layers$n.c" || fail "primec build --param layers=$n"
done
s1=$(wc -c <"$dir/layers1.c")
s2=$(wc -c <"$dir/layers2.c")
s8=$(wc -c <"$dir/layers8.c")
s32=$(wc -c <"$dir/layers32.c")
echo "emitted C: 1 layer $s1 bytes, 2 layers $s2, 8 layers $s8, 32 layers $s32"
awk -v a="$s8" -v b="$s32" 'BEGIN { printf "32 / 8 layers: %.4f (bound 1.01)\n", b / a; exit !(b <= 1.01 * a) }' ||
    fail "the C of 32 layers grows by more than 1% over 8 layers"
awk -v a="$s1" -v b="$s32" 'BEGIN { printf "32 / 1 layers: %.4f (bound 2)\n", b / a; exit !(b <= 2 * a) }' ||
    fail "the C of 32 layers is more than twice the 1-layer model's"
# The weights of every copy are allocated by one loop, not one action
# per copy: the program names as many tensors (T_ entries of its enum)
# at 32 layers as at 8.
names() {
    sed -n '/^enum {/,/^};/p' "$1" | grep -c '^ *T_'
}
n8=$(names "$dir/layers8.c")
n32=$(names "$dir/layers32.c")
echo "tensors named: 8 layers $n8, 32 layers $n32"
[ "$n8" -gt 0 ] && [ "$n8" -eq "$n32" ] || fail "the 32-layer program names $n32 tensors, the 8-layer one $n8"

if [ "$mode" != check ]; then
    echo PASS
    exit 0
fi
exe=$("$primec" build "$file" --model "$model" --param layers=8 -o "$dir/bin") ||
    fail "primec build --param layers=8"
"$exe" --check >"$dir/run.out" 2>&1
rc=$?
tail -3 "$dir/run.out"
[ "$rc" -eq 0 ] || fail "$exe --check exited with $rc"
grep -q "^check passed$" "$dir/run.out" || fail "no 'check passed'"
grep -q "counters equal the compiler's prediction" "$dir/run.out" || fail "counters differ from the prediction"
echo PASS
